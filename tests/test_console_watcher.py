"""The console watcher: kernel splats are found and quoted, clean text is not."""

from pathlib import Path

import pytest

from dcblab.guest.console import (BOOT_FAILURES, SPLAT_PATTERNS, BootFailed,
                                  Console, find_boot_failure, find_splats)

DATA = Path(__file__).parent / "data"

# A WARN() report in the format 6.1 prints it (x86_64, SMP).
WARNING_REPORT = """\
[   12.345678] ------------[ cut here ]------------
[   12.345701] WARNING: CPU: 1 PID: 57 at net/core/dev.c:3205 skb_warn_bad_offload+0x72/0x110
[   12.345900] Modules linked in:
[   12.346010] CPU: 1 PID: 57 Comm: priosend Not tainted 6.1.192-dcblab #1
[   12.346100] Hardware name: QEMU Standard PC (i440FX + PIIX, 1996), BIOS 1.16.2-debian-1.16.2-1 04/01/2014
[   12.346200] RIP: 0010:skb_warn_bad_offload+0x72/0x110
[   12.346700] Call Trace:
[   12.346750]  <TASK>
[   12.346800]  __skb_gso_segment+0x10e/0x150
[   12.346850]  validate_xmit_skb+0x2a5/0x320
[   12.346900]  </TASK>
[   12.346950] ---[ end trace 0000000000000000 ]---
"""

OOPS_REPORT = """\
[   30.100000] BUG: kernel NULL pointer dereference, address: 0000000000000008
[   30.100100] #PF: supervisor read access in kernel mode
[   30.100200] Oops: 0000 [#1] PREEMPT SMP NOPTI
[   30.100300] RIP: 0010:netprio_set_prio+0x1d/0x80
[   30.100400] Kernel panic - not syncing: Fatal exception
"""


def test_clean_boot_console_has_no_splats():
    text = (DATA / "clean-boot.log").read_text()
    assert "dcblab-init: up:" in text  # it is a whole, real boot
    assert find_splats(text) == []


def test_warning_report_is_found_and_quoted_with_its_body():
    text = "[    1.0] dcblab-init: up\n" + WARNING_REPORT
    splats = find_splats(text)
    assert len(splats) == 1
    assert splats[0].startswith("[   12.345701] WARNING: CPU: 1 PID: 57")
    assert "RIP: 0010:skb_warn_bad_offload" in splats[0]
    assert "Call Trace:" in splats[0]


def test_oops_report_is_found():
    splats = find_splats(OOPS_REPORT)
    assert splats and "BUG: kernel NULL pointer dereference" in splats[0]
    assert "Kernel panic" in "\n".join(splats)


@pytest.mark.parametrize("pattern", SPLAT_PATTERNS)
def test_every_splat_pattern_is_detected_on_its_own(pattern):
    line = f"[    5.000000] something {pattern} something"
    assert find_splats(f"[    4.0] fine\n{line}\n") == [line]


def test_lowercase_warning_words_are_not_splats():
    text = ("[    0.5] warning: kernel was built without ACPI\n"
            "[    0.6] Bug fixed in 6.1: no\n")
    assert find_splats(text) == []


def test_console_reports_each_splat_once_and_only_whole_lines(tmp_path):
    log = tmp_path / "console.log"
    con = Console(log, "g")
    log.write_text("[    1.0] dcblab-init: started\n")
    assert con.splats() == []
    with open(log, "a") as f:
        f.write("[    2.0] WARNING: CPU: 0 PID: 1 at x.c:1 f+0x0/0x1")
    assert con.splats() == []  # the line is not finished yet
    with open(log, "a") as f:
        f.write("\n")
    assert len(con.splats()) == 1
    assert con.splats() == []  # already reported


# --- boot failures -----------------------------------------------------------

UNPACK_FAILED = """\
[    0.000000] Linux version 6.1.192-dcblab (root@vm) #1 SMP
[    0.855680] Initramfs unpacking failed: write error
[    1.431595] dcblab-init: started (pid 1)
[    1.768924] dcblab-init: FAILED: no virtio port named org.qemu.guest_agent.0
"""


def test_clean_boot_console_has_no_boot_failure():
    assert find_boot_failure((DATA / "clean-boot.log").read_text()) is None


@pytest.mark.parametrize("pattern", BOOT_FAILURES)
def test_every_boot_failure_pattern_is_found_on_its_own(pattern):
    line = f"[    2.000000] {pattern}why"
    assert find_boot_failure(f"[    1.0] fine\n{line}\n[    3.0] more\n") \
        == line


def test_boot_failure_is_the_first_line_saying_so():
    assert find_boot_failure(UNPACK_FAILED) == \
        "[    0.855680] Initramfs unpacking failed: write error"


def test_wait_for_stops_at_a_boot_failure_before_the_awaited_line(tmp_path):
    """init started from an initramfs cut short: no boot, though the
    awaited line came."""
    log = tmp_path / "console.log"
    log.write_text(UNPACK_FAILED)
    with pytest.raises(BootFailed) as e:
        Console(log, "h1").wait_for(r"dcblab-init: started", timeout=5)
    assert e.value.line == \
        "[    0.855680] Initramfs unpacking failed: write error"
    assert str(e.value).startswith("h1: the boot failed: [    0.855680] "
                                   "Initramfs unpacking failed")
