"""Failure reports: what a failed test shows and leaves behind.

End to end, each case runs an inner pytest session (pytester, in a
subprocess) that boots its own lab and fails on purpose: its report must
carry the guests' evidence (traffic tools' output, the receiver's per-PCP
flower counters, ifpriomaps, VLAN QoS maps, tracepoint counts, lldpad's
log) and name
an artefact folder holding it whole; with --keep-lab-on-failure its lab
must stay up; a lab whose guests do not boot fails its tests' set-up and
leaves the same folder (consoles, QEMU logs, keeper log, commands). The
rest checks the pieces without a guest.
"""

import re
import subprocess
from xml.etree import ElementTree

import pytest

from dcblab.core import paths
from dcblab.core.cmd import CmdError
from dcblab.core.paths import ROOT
from dcblab.guest.agent import AgentError, Result
from dcblab.lab import Lab, LabError, leftovers, read_state
from dcblab.lab import DCBAPP_LOG, LLDPAD_LOG
from dcblab.testing import (KEEP_OUTPUT, NETPRIO, Guest, artefact_dir,
                            evidence, filter_counters, gather, sections)

VID, PRIO, COUNT = 100, 5, 200

TRAFFIC = f'''
import pytest

from dcblab.testing import (NETPRIO, Sink, TraceCounter, cgroup, map_priority,
                            send, traffic_classes)


@pytest.fixture
def breaks_on_teardown():
    yield
    raise RuntimeError("teardown fails on purpose too")


def test_fails_after_traffic(lab, breaks_on_teardown):
    dst = lab.topology.address("h2", {VID}, "ipv4")
    traffic_classes(lab.h1, lab.h2, dst, {VID})
    path, idx = cgroup(lab.h1, NETPRIO, "evid")
    map_priority(lab.h1, path, "eth0.{VID}", {PRIO})
    TraceCounter(lab.h1, "evid", f"prioidx == {{idx}}")
    sink = Sink(lab.h2, "eth0", count={COUNT}, timeout=30, idle=2)
    send(lab.h1, dst, count={COUNT}, cgroup=path)
    sink.result()
    assert False, "fails on purpose, after the traffic"
'''

FAILS = f'''
from dcblab.testing import NETPRIO, cgroup, map_priority


def test_fails_on_purpose(lab):
    path, _ = cgroup(lab.h1, NETPRIO, "kept")
    map_priority(lab.h1, path, "eth0.{VID}", {PRIO})
    assert False, "fails on purpose"
'''


# docs/writing-tests.md's conftest.py example: the hook as users see it.
OWN_EVIDENCE = re.search(r"^<!-- example: conftest.py -->\n```python\n"
                         r"(.*?)^```", (ROOT / "docs" / "writing-tests.md")
                         .read_text(), re.M | re.S).group(1)


NEEDS_LAB = '''
def test_first_needs_the_lab(lab):
    pass


def test_second_needs_the_lab(lab):
    pass
'''

# The lab kernel as built, before a test points BUILD elsewhere.
KERNEL = paths.bzimage("lab")


@pytest.fixture
def inner(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))

    def run(name, source, *options):
        pytester.makepyfile(**{name: source})
        return pytester.runpytest_subprocess(
            "-p", "dcblab.testing.plugin", "-p", "no:cacheprovider",
            "--dcblab-artefacts", str(pytester.path / "artefacts"), *options,
            timeout=240)
    return run


def _section(out, title):
    """The text of one section of the failed call's report (pytest prints
    `---- title ----`; errors of other phases come before FAILURES)."""
    failures = out[out.index("= FAILURES ="):]
    m = re.search(rf"^-{{4,}} {re.escape(title)} -{{4,}}$\n(.*?)"
                  r"(?=^[-=_]{4,} .* [-=_]{4,}$)", failures, re.M | re.S)
    assert m, f"no section {title!r} in:\n{out}"
    return m.group(1)


# --- end to end -----------------------------------------------------------

def test_failed_test_reports_and_keeps_the_guests_evidence(inner, pytester):
    folder = artefact_dir(pytester.path / "artefacts",
                          "test_inner_traffic.py::test_fails_after_traffic")
    folder.mkdir(parents=True)
    (folder / "stale.txt").write_text("from a former run\n")

    pytester.makeconftest(OWN_EVIDENCE)
    junit = pytester.path / "junit.xml"
    res = inner("test_inner_traffic", TRAFFIC, f"--junitxml={junit}")
    res.assert_outcomes(failed=1, errors=1)
    out = res.stdout.str()

    # A user's own evidence (the hookspec), in the report and report.txt.
    ets = _section(out, "h2's ETS")
    assert re.search(r"^prio-tc 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0 ?$", ets,
                     re.M), ets
    assert f"----- h2's ETS -----\n{ets.strip()}" in \
        (folder / "report.txt").read_text()
    # The junit XML: the folder with the test, the run with the suite.
    xml = ElementTree.parse(junit).getroot()
    # (pytest writes a test that failed and then erred at teardown as two
    # testcases; the properties go with the second)
    props = [(p.get("name"), p.get("value")) for case in xml.iterfind(
        ".//testcase[@name='test_fails_after_traffic']")
        for p in case.iter("property")]
    assert props == [("dcblab_artefacts", str(folder)),
                     ("dcblab_artefacts", str(folder / "teardown"))]
    suite = {p.get("name"): p.get("value")
             for p in xml.find("testsuite").find("properties")}
    assert suite["dcblab_kernel"] == str(KERNEL)
    assert (suite["dcblab_flavour"], suite["dcblab_backend"]) == \
        ("lab", "qemu")
    assert any(k.startswith("dcblab_lab_pytest-") and
               re.fullmatch(r"two-hosts up in [\d.]+ s", v)
               for k, v in suite.items()), suite

    tools = _section(out, "priosend/priosink")
    assert f'"sent":{COUNT}' in tools
    pcp = [COUNT if p == PRIO else 0 for p in range(8)]
    assert f'"pcp":{pcp}'.replace(" ", "") in tools
    counters = _section(out, "per-PCP counters (tc -s filter)")
    # traffic_classes(): the filter of PCP p has pref 10 + p.
    assert (f"h2 eth0 ingress pref {10 + PRIO} flower vlan_id {VID} "
            f"vlan_prio {PRIO}: {COUNT} pkt (gact action pass)") \
        in counters.splitlines()
    cgroups = _section(out, "net_prio / net_cls cgroups")
    assert re.search(rf"^h1 /sys/fs/cgroup/net_prio/evid: prioidx \d+, "
                     rf"ifpriomap eth0\.{VID} {PRIO} ", cgroups, re.M)
    vlans = _section(out, "VLAN QoS maps")
    assert re.search(rf"^h1 eth0\.{VID} \(vid {VID} on eth0\): .*egress "
                     rf".*\b{PRIO}:{PRIO}\b", vlans, re.M)
    tracing = _section(out, "tracing")
    assert re.search(rf"^h1 instance evid: tracing_on 1, 1 event\(s\): "
                     rf"net_prio:netprio_skb_update if prioidx == \d+; "
                     rf"entries {COUNT} overrun 0; hits "
                     rf"net_prio:netprio_skb_update {COUNT}$", tracing, re.M)
    # The shipped lab runs lldpad (dcbx = true): each guest's log, its
    # first line the start mark of dcblab-lldpad.
    lldpad = _section(out, "lldpad")
    for host in ("h1", "h2"):
        assert re.search(rf"^{host}: lldpad running \(pid \d+\); "
                         rf"/run/lldpad\.log: last \d+ lines$", lldpad, re.M)
    assert f"{folder}/" in _section(out, "artefacts")

    assert not (folder / "stale.txt").exists()
    for name in ("report.txt", "commands.txt", "h1/console.log",
                 "h1/qemu.log", "h1/cgroups.txt", "h1/tracing.txt",
                 "h2/console.log", "h2/tc-filter.txt", "h2/vlan.txt",
                 "h2/ip-link.txt", "h2/tc-qdisc.txt", "h1/lldpad.txt",
                 "h2/lldpad.txt"):
        assert (folder / name).is_file(), name
    assert "=== dcblab-lldpad: start at " in \
        (folder / "h2/lldpad.txt").read_text()
    assert "fails on purpose, after the traffic" in \
        (folder / "report.txt").read_text()
    commands = (folder / "commands.txt").read_text()
    assert f'"pcp":{pcp}'.replace(" ", "") in commands
    filters = (folder / "h2/tc-filter.txt").read_text()
    assert re.search(rf"vlan_prio {PRIO}\n(.*\n)*?\s*Sent \d+ bytes "
                     rf"{COUNT} pkt", filters)
    assert f"eth0.{VID} {PRIO}\n" in (folder / "h1/cgroups.txt").read_text()
    # The test's second failure, its teardown, goes beside the first.
    assert "teardown fails on purpose too" in \
        (folder / "teardown/report.txt").read_text()


def test_keep_lab_on_failure_leaves_the_lab_up_until_down(inner):
    # -x: the failure ends the session, so the failed test's own state is
    # kept, not the baseline.
    res = inner("test_inner_keep", FAILS, "--keep-lab-on-failure", "-x")
    out = res.stdout.str()
    names = set(re.findall(r"lab (pytest-\d+) kept up", out)) | \
        set(re.findall(r"(pytest-\d+)-keeper\.log", out))
    try:
        res.assert_outcomes(failed=1)
        m = re.search(r"^lab (pytest-\d+) kept up: `(\S+) status --name "
                      r"\1`, `\2 shell --name \1 h2`, `\2 down --name "
                      r"\1`$", out, re.M)
        assert m, out
        name = m.group(1)
        # The inner pytest has exited: the lab is up and has no owner.
        state = read_state(name)
        assert (state["status"], state["owner_pid"]) == ("up", None)
        lab = Lab.attach(name)
        rows = lab.machines["h1"].agent.run(
            ["cat", f"{NETPRIO}/kept/net_prio.ifpriomap"]).stdout
        assert f"eth0.{VID} {PRIO}" in rows.splitlines()
        lab.down()
        assert leftovers(name, state["run_id"]) == []
    finally:
        for name in names:
            try:
                Lab.attach(name).down()
            except LabError:
                pass            # down already, as it should be


def test_lab_that_fails_to_boot_leaves_its_logs_with_the_failed_setup(
        inner, pytester, monkeypatch, tmp_path_factory):
    """The real kernel with an empty initramfs panics at boot: the lab
    fixture fails the set-up of both tests; the first one's artefact
    folder holds what the keeper removed with the run directory."""
    assert KERNEL.exists(), "the lab kernel is not built: make kernel"
    build = pytester.path / "build"
    (build / KERNEL.relative_to(paths.build_dir())).parent.mkdir(
        parents=True)
    (build / KERNEL.relative_to(paths.build_dir())).symlink_to(KERNEL)
    with open(build / "initramfs.cpio", "wb") as out:
        subprocess.run(["cpio", "--quiet", "-o", "-H", "newc"], input=b"",
                       stdout=out, check=True)
    # Short: the guests' sockets are in it (sun_path holds 108 bytes).
    run = tmp_path_factory.mktemp("run")
    for var, value in (("BUILD", build), ("DCBLAB_RUN", run),
                       ("DCBLAB_ACCEL", "tcg"), ("FLAVOUR", "lab")):
        monkeypatch.setenv(var, str(value))

    res = inner("test_inner_boot", NEEDS_LAB)
    res.assert_outcomes(errors=2)
    out = res.stdout.str()
    first = artefact_dir(pytester.path / "artefacts",
                         "test_inner_boot.py::test_first_needs_the_lab")
    second = artefact_dir(pytester.path / "artefacts",
                          "test_inner_boot.py::test_second_needs_the_lab")
    for host in ("h1", "h2"):
        console = (first / host / "console.log").read_text()
        assert "Kernel panic - not syncing: " in console
        assert (first / host / "qemu.log").is_file()
        # The LabError's lines, as pytest prints them ("E   ...").
        assert re.search(rf" {host}: boot failed: \[[^]]*\] Kernel panic - "
                         "not syncing: ", out), out
    keeper = list(first.glob("pytest-*-keeper.log"))
    assert len(keeper) == 1 and "boot failed" in keeper[0].read_text()
    assert (first / "commands.txt").read_text() == "(no guest commands)\n"
    assert "boot failed" in (first / "report.txt").read_text()
    # The second test names the first one's folder and has none of its own.
    assert out.count(f"{first}/ (lab pytest-") == 2, out
    assert not second.exists()
    assert not run.exists() or list(run.iterdir()) == []


# --- the pieces -----------------------------------------------------------

FLOWER_AND_CGROUP = """\
filter protocol 802.1Q pref 15 flower chain 0 
filter protocol 802.1Q pref 15 flower chain 0 handle 0x1 
  vlan_id 100
  vlan_prio 5
  not_in_hw
\taction order 1: gact action pass
\t random type none pass val 0
\t index 6 ref 1 bind 1 installed 48 sec used 47 sec firstused 47 sec
\tAction statistics:
\tSent 27600 bytes 300 pkt (dropped 0, overlimits 0 requeues 0) 
\tbacklog 0b 0p requeues 0

filter protocol all pref 1 cgroup chain 0 
filter protocol all pref 1 cgroup chain 0 handle 0x1 
\taction order 1: skbedit  priority :5 pipe
\t index 1 ref 1 bind 1 installed 41 sec used 41 sec
\tAction statistics:
\tSent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
\tbacklog 0b 0p requeues 0
"""


def test_filter_counters_read_one_entry_per_filter_from_tc_text():
    # Text, not `tc -j`: iproute2 6.1 prints invalid JSON for cgroup
    # filters ("options":{handle 0x1 ...).
    assert filter_counters(FLOWER_AND_CGROUP) == [
        (15, "flower", "vlan_id 100 vlan_prio 5", "gact action pass", 300),
        (1, "cgroup", "", "skbedit priority :5 pipe", 0)]


class _FakeMachine:
    def __init__(self, name, agent, alive=True):
        self.name, self.agent, self._alive = name, agent, alive

    def alive(self):
        return self._alive


class _BrokenAgent:
    def exec(self, argv, **kw):
        raise AgentError("h9: agent socket closed")


def test_evidence_that_cannot_be_gathered_is_reported_not_raised():
    guests = [Guest(_FakeMachine("h9", _BrokenAgent())),
              Guest(_FakeMachine("h8", _BrokenAgent(), alive=False))]
    found = gather(guests)
    errors = dict(sections(found, []))["evidence errors"].splitlines()
    assert errors[0].startswith("h9: evidence not gathered: AgentError(")
    assert "agent socket closed" in errors[0]
    assert errors[1] == "h8: guest not running"


class _EchoAgent:
    """Answers every command with OUT on stdout and rc RC."""

    def __init__(self, out, rc=0):
        self.out, self.rc = out, rc

    def run(self, argv, check=True, **kw):
        if check and self.rc:
            raise CmdError(argv, self.rc, self.out, "boom\n", where="h1")
        return Result(list(argv), self.rc, self.out, "")

    def exec(self, argv, **kw):
        return Result(list(argv), self.rc, self.out, "")

    def spawn(self, argv, **kw):
        return 42

    def wait(self, pid, argv, timeout):
        return Result(list(argv), self.rc, self.out, "")


def _lldpad_items(status, log_lines):
    """What the evidence script prints of lldpad: its status, its log."""
    return ("@@dcblab-item lldpad status\n" + status +
            f"@@dcblab-item lldpad {LLDPAD_LOG}\n" +
            "".join(f"{line}\n" for line in log_lines))


def test_report_shows_lldpad_state_and_the_last_lines_of_its_log():
    log = [f"12:00:{n:02d}.000000 line {n}" for n in range(40)]
    running = Guest(_FakeMachine("h1", _EchoAgent(_lldpad_items("85\n",
                                                                log))))
    gone = Guest(_FakeMachine("h2", _EchoAgent(_lldpad_items(
        "dcblab-lldpad: lldpad not running\n", log[:3]))))
    text = dict(sections(gather([running, gone]), []))["lldpad"]
    shown = evidence.LLDPAD_SHOWN
    assert text.splitlines() == (
        [f"h1: lldpad running (pid 85); {LLDPAD_LOG}: last {shown} lines"]
        + [f"  {line}" for line in log[-shown:]]
        + [f"h2: lldpad not running; {LLDPAD_LOG}: last 3 lines"]
        + [f"  {line}" for line in log[:3]])


def test_report_has_no_lldpad_section_where_lldpad_never_ran():
    g = Guest(_FakeMachine("h1", _EchoAgent("@@dcblab-item procs\n")))
    assert "lldpad" not in dict(sections(gather([g]), []))


def test_guest_script_writes_the_log_the_evidence_reads():
    # Were they to disagree, reports would quietly say nothing of lldpad.
    script = (ROOT / "guest-image" / "lldpad").read_text()
    assert f" LOG={LLDPAD_LOG}\n" in script


def test_report_shows_dcbapp_netprio_after_lldpad_where_it_ran():
    items = (_lldpad_items("85\n", ["lldpad line"])
             + "@@dcblab-item lldpad dcbapp-netprio status\n"
             "dcblab-dcbapp: dcbapp-netprio not running\n"
             f"@@dcblab-item lldpad {DCBAPP_LOG}\n"
             "dcbapp-netprio: eth0: app sel 3 proto 4791 prio 5: cgroup "
             "cgdcbx-3-4791 ifpriomap eth0 5, eth0.100 5\n")
    g = Guest(_FakeMachine("h1", _EchoAgent(items)))
    text = dict(sections(gather([g]), []))["lldpad"]
    assert text.splitlines() == [
        f"h1: lldpad running (pid 85); {LLDPAD_LOG}: last 1 lines",
        "  lldpad line",
        f"h1: dcbapp-netprio not running; {DCBAPP_LOG}: last 1 lines",
        "  dcbapp-netprio: eth0: app sel 3 proto 4791 prio 5: cgroup "
        "cgdcbx-3-4791 ifpriomap eth0 5, eth0.100 5"]


def test_guest_dcbapp_script_writes_the_log_the_evidence_reads():
    script = (ROOT / "guest-image" / "dcbapp").read_text()
    assert f" LOG={DCBAPP_LOG}\n" in script


def test_history_keeps_what_commands_printed_clipped():
    big = "x" * (3 * KEEP_OUTPUT)
    g = Guest(_FakeMachine("h1", _EchoAgent(big)))
    g.wait(g.spawn(["priosink", "-j"]))
    spawned, collected = g.history
    assert (spawned.outcome, spawned.stdout) == ("& (guest pid 42)", "")
    assert collected.rc == 0
    assert KEEP_OUTPUT < len(collected.stdout) < KEEP_OUTPUT + 100
    assert f"[... {2 * KEEP_OUTPUT} characters cut ...]" in collected.stdout


def test_history_keeps_the_output_of_a_command_that_failed():
    g = Guest(_FakeMachine("h1", _EchoAgent("partial\n", rc=3)))
    with pytest.raises(CmdError):
        g.run(["cgwrite", "/x", "eth0 5"])
    (c,) = g.history
    assert (c.rc, c.stdout, c.stderr) == (3, "partial\n", "boom\n")
    assert str(c).startswith("h1$ cgwrite /x 'eth0 5'  -> rc 3 (")


@pytest.mark.parametrize("nodeid, name", [
    ("tests/test_a.py::test_b", "tests_test_a.py_test_b"),
    ("tests/test_a.py::test_b[lower-only]",
     "tests_test_a.py_test_b_lower-only"),
    ("t.py::test_c[eth0.100 five]", "t.py_test_c_eth0.100_five"),
])
def test_artefact_folder_is_named_after_the_test_id(tmp_path, nodeid, name):
    assert artefact_dir(tmp_path, nodeid) == tmp_path / name
