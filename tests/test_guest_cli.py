"""`dcblab exec` behaves like a shell command; `shell`, `console`, `cp`,
`reset` and `pcp` do what a student working in the lab expects. All of
them run against the session lab, through its keeper, while this pytest
process uses the same guests."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from dcblab.core.paths import ROOT
from dcblab.core.proc import SIGINT_DEFAULT
from terminal import attached as _attached, console_shell

DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]


def _dcblab(lab, args, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("timeout", 60)
    if "input" not in kw:
        kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(DCBLAB + [args[0], "--name", lab.name, *args[1:]],
                          **kw)


def _pgrep(guest, pattern):
    """Guest pids whose command line matches the regex PATTERN."""
    out = guest.run(["ps", "-o", "pid,args"]).stdout.splitlines()[1:]
    return [line.split()[0] for line in out
            if re.search(pattern, line.split(None, 1)[1])
            and "ps -o" not in line]


def _wait_for(cond, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# --- exec -------------------------------------------------------------------

def test_exec_passes_stdout_stderr_and_exit_code_through(lab):
    r = _dcblab(lab, ["exec", "h1", "--", "sh", "-c",
                      "echo out; echo err >&2; exit 7"], text=True)
    assert (r.returncode, r.stdout, r.stderr) == (7, "out\n", "err\n")


def test_exec_options_after_the_host_are_dcblab_options(lab):
    r = _dcblab(lab, ["exec", "h1", "--timeout", "30", "--", "echo", "x",
                      "--timeout"], text=True)
    assert (r.returncode, r.stdout) == (0, "x --timeout\n"), r.stderr


def test_exec_passes_stdin(lab):
    r = _dcblab(lab, ["exec", "h1", "--", "sh", "-c", "read x; echo got $x"],
                input=b"hi\n")
    assert (r.returncode, r.stdout) == (0, b"got hi\n"), r.stderr


def test_exec_is_binary_safe_both_ways(lab):
    data = bytes(range(256)) * 4
    r = _dcblab(lab, ["exec", "h1", "--", "sh", "-c",
                      "cat > /tmp/bin; cat /tmp/bin; cat /tmp/bin >&2"],
                input=data)
    assert (r.returncode, r.stdout, r.stderr) == (0, data, data)
    r = _dcblab(lab, ["exec", "h1", "--", "head", "-c", "1000",
                      "/dev/urandom"])
    assert len(r.stdout) == 1000


def test_exec_streams_output_while_the_command_runs(lab):
    p = subprocess.Popen(DCBLAB + ["exec", "--name", lab.name, "h1", "--",
                                   "sh", "-c",
                                   "echo first; sleep 2; echo second"],
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert p.stdout.readline() == b"first\n"
        assert p.poll() is None  # the command is still sleeping
        assert p.stdout.readline() == b"second\n"
        assert p.wait(30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_exec_of_missing_program_gives_127_like_a_shell(lab):
    r = _dcblab(lab, ["exec", "h1", "--", "no-such-program", "x"], text=True)
    assert r.returncode == 127
    assert r.stderr == "dcblab-run: no-such-program: command not found\n"


def test_exec_timeout_gives_124_and_kills_the_process_group(lab):
    r = _dcblab(lab, ["exec", "h1", "--timeout", "1", "--", "sh", "-c",
                      "sleep 301 & sleep 302; echo not reached"], text=True)
    assert (r.returncode, r.stdout) == (124, "")
    # Both the command and the child it started are gone.
    assert _pgrep(lab.h1, "sleep 30[12]") == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM],
                         ids=["SIGINT", "SIGTERM"])
def test_exec_interrupted_kills_the_guest_process(lab, sig):
    p = subprocess.Popen([*SIGINT_DEFAULT, *DCBLAB, "exec", "--name",
                          lab.name, "h1", "--", "sh", "-c",
                          "echo started; sleep 303"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        assert p.stdout.readline() == b"started\n"
        assert _pgrep(lab.h1, "sleep 303")
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        # Never left behind polling h1 (it would count as commands sent
        # to h1 in a later test's restore).
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130 and b"Traceback" not in err
    assert _pgrep(lab.h1, "sleep 303") == []


def test_two_execs_on_one_guest_at_once(lab):
    """A long command (a receiver waiting for traffic) does not block a
    second exec on the same guest, nor this process's own commands."""
    first = subprocess.Popen(DCBLAB + ["exec", "--name", lab.name, "h2",
                                       "--", "sh", "-c",
                                       "echo waiting; sleep 3; echo done"],
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert first.stdout.readline() == b"waiting\n"
        r = _dcblab(lab, ["exec", "h2", "--", "hostname"], text=True)
        assert (r.returncode, r.stdout) == (0, "h2\n"), r.stderr
        assert lab.h2.run(["hostname"]).stdout == "h2\n"
        assert first.poll() is None
        assert first.stdout.read() == b"done\n"
    finally:
        first.wait(30)


def test_exec_tc_in_sh_is_iproute2_not_busybox(lab):
    r = _dcblab(lab, ["exec", "h1", "--", "sh", "-c",
                      "tc qdisc add dev eth0 clsact && tc qdisc show dev "
                      "eth0 clsact"], text=True)
    assert r.returncode == 0, r.stderr
    assert "qdisc clsact ffff: parent ffff:fff1" in r.stdout


@pytest.mark.parametrize("argv", [["tcpdump", "--version"],
                                  ["iperf3", "--version"],
                                  ["ss", "-V"]])
def test_student_tools_are_in_the_guest(lab, argv):
    r = lab.h1.run(argv, check=False)
    assert r.rc == 0, r.stderr
    assert re.search(r"\d+\.\d+", r.stdout + r.stderr)


# --- shell and console ------------------------------------------------------

def test_shell_is_an_interactive_tty_with_job_control(lab):
    with _attached(lab, "shell", "h2") as sh:
        sh.expect(rb"root@h2")
        sh.send(b"tty; stty size; echo $((6*7))\r")
        sh.expect(rb"/dev/hvc0")
        sh.expect(rb"40 132")
        sh.expect(rb"42")
        # Ctrl-C reaches the guest's foreground process, not dcblab.
        sh.send(b"sleep 304\r")
        _wait_for(lambda: _pgrep(lab.h2, "sleep 304"), "sleep 304 to run")
        sh.send(b"\x03")
        sh.send(b"echo rc=$?\r")
        sh.expect(rb"rc=130")
        sh.send(b"sleep 305 &\r")
        sh.send(b"jobs\r")
        sh.expect(rb"\[1\]\+\s+Running\s+sleep 305")
    # Detaching hung the session up: its background job went with it.
    assert _pgrep(lab.h2, "sleep 305") == []


def test_a_second_shell_on_the_same_host_is_refused_with_a_reason(lab):
    with _attached(lab, "shell", "h1") as sh:
        sh.expect(rb"root@h1")
        r = _dcblab(lab, ["shell", "h1"], text=True)
        assert r.returncode == 1
        assert r.stderr.startswith("dcblab: h1's shell is in use by another")


def test_console_has_a_shell_on_ttyS0(lab):
    """On a libvirt lab `dcblab console` is `virsh console`, which drops
    what was typed before it had the pty in raw mode: type until the
    guest answers."""
    with _attached(lab, "console", "h1") as con:
        console_shell(con)


# --- cp, reset, pcp ---------------------------------------------------------

def test_cp_to_and_from_a_guest_is_byte_exact(lab, tmp_path):
    src = tmp_path / "blob"
    src.write_bytes(os.urandom(200_000))
    r = _dcblab(lab, ["cp", str(src), "h1:/tmp/blob"], text=True)
    assert r.returncode == 0, r.stderr
    back = tmp_path / "back"
    r = _dcblab(lab, ["cp", "h1:/tmp/blob", str(back)], text=True)
    assert r.returncode == 0, r.stderr
    assert back.read_bytes() == src.read_bytes()
    sums = lab.h1.run(["md5sum", "/tmp/blob"]).stdout.split()[0]
    assert sums == __import__("hashlib").md5(src.read_bytes()).hexdigest()


def test_reset_brings_back_a_vlan_device_deleted_by_hand(lab):
    lab.h1.run(["ip", "link", "del", "eth0.100"])
    lab.h1.run(["ip", "addr", "flush", "dev", "eth0"])
    lab.h2.run(["mkdir", "/sys/fs/cgroup/net_prio/left"])
    r = _dcblab(lab, ["reset", "h1", "h2"], text=True)
    assert r.returncode == 0, r.stderr
    # the restore reset runs first sees the VLAN device gone and makes the
    # baseline again, the eth0 address included
    made = [ln for ln in r.stdout.splitlines()
            if ln.startswith("h1: restore: baseline made again (missing: ")]
    assert len(made) == 1, r.stdout
    assert " eth0.100," in made[0] and " on eth0," in made[0], made[0]
    assert "h2: restore: removed cgroup /sys/fs/cgroup/net_prio/left" in \
        r.stdout
    assert r.stdout.rstrip().endswith("h2: at the topology's baseline "
                                      "(devices eth0, eth0.100)")
    res = lab.h1.run(["ping", "-c", "2", "-W", "2",
                      lab.topology.address("h2", 100)], check=False)
    assert res.rc == 0, res.stdout


def test_restore_by_hand_without_devices_refuses(lab):
    res = lab.h1.run(["dcblab-restore"], check=False)
    assert res.rc == 2
    assert "dcblab reset HOST" in res.stdout + res.stderr
    assert "eth0.100" in lab.h1.run(["ip", "-br", "link"]).stdout


def test_pcp_on_a_device_the_guest_lacks_names_its_devices_exit_2(lab):
    r = _dcblab(lab, ["pcp", "h2", "--dev", "eth7"], text=True)
    assert r.returncode == 2
    devs = ", ".join(n.name for n in lab.topology.host("h2").nics)
    assert r.stderr.startswith(f'dcblab: pcp: h2 has no device "eth7" (its '
                               f"devices: {devs}")
    assert r.stderr.count("\n") == 1


def test_pcp_arms_counters_then_counts_frames_per_pcp(lab):
    dst = lab.topology.address("h2", 100)
    lab.h1.run(["ping", "-c", "1", "-W", "2", dst])  # resolve first
    r = _dcblab(lab, ["pcp", "h2", "-j"], text=True)
    assert r.returncode == 0, r.stderr
    first = __import__("json").loads(r.stdout)
    # Armed now and read at once: nothing of PCP 1..7 yet; PCP 0 may
    # already hold a neighbour frame of h1's on the VLAN (priority 0;
    # seen once in the libvirt pass: 1).
    assert first["armed_now"] and first["pcp"][1:] == [0] * 7, first
    assert first["pcp"][0] <= 2, first
    lab.h1.run(["priosend", "-c", "5", "-P", "3", dst])
    r = _dcblab(lab, ["pcp", "h2"], text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "h2 eth0 ingress, VLAN 100: frames per PCP"
    counts = [int(c) for c in lines[2].split()]
    # PCP 0 may also hold h1's own ARP or neighbour discovery frames on
    # the VLAN (priority 0): every other PCP saw nothing.
    assert counts[3] == 5, r.stdout
    assert counts[1:3] + counts[4:] == [0] * 6, r.stdout
