"""Machines simulated on this one (dcblab.lab.simmachines): each reached by
ssh through a ProxyCommand, no port anywhere, with its own /run, network,
PID and UTS namespaces, all joined by one data-centre network; nothing of
them left on the host after down(), after a failed up(), after their
owner is killed or their holders are, and no write on the host at all
(checked in a Sandbox, where even what the host already holds shows).
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from dcblab.core import paths, proc
from dcblab.core.cmd import CmdError, run
from dcblab.lab import reaper
from dcblab.lab.runs import remove_run_root, run_root
from dcblab.lab.simmachines import (DC_DEVICE, DEFAULT_MTU, SSHD, SimError,
                                    SimMachines, leftovers)
from dcblab.testing.sandbox import Sandbox, diff_state, host_state

pytestmark = pytest.mark.skipif(
    not os.access(SSHD, os.X_OK),
    reason=f"{SSHD} is not installed: `make deps` installs openssh-server")

NOTHING = {"added": [], "changed": [], "removed": []}
# Debian's: inside a machine, /root is its own (no pyenv shims).
PY = "/usr/bin/python3"
# Receives one UDP datagram on ADDRESS PORT; prints "ready", then the
# datagram and its sender's address.
RECEIVE = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(20)
print("ready", flush=True)
data, (sender, _) = s.recvfrom(100)
print(data.decode().strip(), sender, flush=True)
"""


def _name():
    return f"t{uuid.uuid4().hex[:8]}"


def _root_links():
    out = run(["ip", "-j", "link", "show"]).stdout
    return sorted(x["ifname"] for x in json.loads(out))


def _mounts_below(path):
    """Mount points in this (the host's) mount namespace at or below
    PATH."""
    real = os.path.realpath(path)
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p == real or p.startswith(real + "/")]


def _link(argv):
    """The one link `ip -j link show ...` in ARGV (an in-namespace argv)
    shows."""
    return json.loads(run(argv).stdout)[0]


def _in_pidns(pid):
    """(pid, start time) of each host process in the PID namespace of
    PID."""
    ns = os.stat(f"/proc/{pid}/ns/pid").st_ino
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.stat(f"/proc/{d}/ns/pid").st_ino == ns:
                    found.append((int(d), proc.start_time(int(d))))
            except OSError:
                pass
    return found


def _wait(what, cond, timeout=20):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def sim():
    with SimMachines(("a", "b"), name=_name()) as s:
        yield s


# --- ssh ---------------------------------------------------------------------

def test_ssh_with_the_sims_config_reaches_each_machine_by_name(sim):
    for name in sim.names:
        r = run(["ssh", "-F", str(sim.ssh_config), name, "--", "hostname"])
        assert r.stdout.strip() == name


def test_sshd_listens_on_no_port(sim):
    for name in sim.names:
        assert sim.run(name, ["ss", "-Hltnu"]).stdout.strip() == ""
    assert run(["ss", "-Hltn", "sport = :22"]).stdout.strip() == ""


def test_remote_argv_arrives_word_for_word(sim):
    words = ["two words", "it's", "$HOME", "a;b", "*"]
    r = sim.run("a", ["printf", "%s\\n", *words])
    assert r.stdout.splitlines() == words


def test_a_failing_remote_command_names_the_machine(sim):
    with pytest.raises(CmdError) as e:
        sim.run("b", ["sh", "-c", "echo nope >&2; exit 3"])
    assert e.value.rc == 3 and e.value.argv[0] == "sh"
    assert "sim machine b" in str(e.value) and "nope" in str(e.value)


def test_ssh_lands_in_the_machines_own_namespaces(sim):
    for name in sim.names:
        for ns in ("net", "mnt", "pid", "uts"):
            over_ssh = sim.run(name, ["readlink", f"/proc/self/ns/{ns}"])
            inside = run(sim.in_machine_argv(
                name, ["readlink", f"/proc/self/ns/{ns}"]))
            mine = os.readlink(f"/proc/self/ns/{ns}")
            assert over_ssh.stdout.strip() == inside.stdout.strip() != mine


def test_each_machine_sees_only_its_own_processes(sim):
    seen = dict(line.split() for line in
                sim.run("a", ["ps", "-eo", "pid=,comm="]).stdout
                .splitlines())
    # Its init (Python), and this ssh session: no process of the host's.
    assert seen["1"] == "python3"
    assert set(seen.values()) <= {"python3", "sshd", "bash", "ps"}, seen


# --- /run --------------------------------------------------------------------

def test_each_machine_has_a_run_of_its_own(sim):
    for name in sim.names:
        r = sim.run(name, ["sh", "-c", "stat -f -c %T /run; ls -A /run; "
                           "ls -A /run/dcblab"])
        fstype, *rest = r.stdout.split()
        assert fstype == "tmpfs"
        entries = set(rest)
        # /run: sshd, dcblab, lock; /run/dcblab: the sim's own directory
        # when it is below /run (its configs and keys), nothing else.
        assert {"sshd", "dcblab", "lock"} <= entries
        assert entries - {"sshd", "dcblab", "lock"} <= {sim.dir.name}


def test_a_file_in_one_machines_run_is_only_there(sim):
    probe = f"/run/dcblab/probe-{uuid.uuid4().hex[:8]}"
    assert not os.path.lexists(probe)
    sim.run("a", ["sh", "-c", f"echo a > {probe}"])
    try:
        assert sim.run("a", ["cat", probe]).stdout == "a\n"
        assert sim.run("b", ["test", "-e", probe], check=False) \
            .returncode == 1
        assert not os.path.lexists(probe)
    finally:
        sim.run("a", ["rm", "-f", probe])


# --- the data-centre network -------------------------------------------------

def _udp(sim, sender, receiver, port=4789):
    """Send a datagram from SENDER to RECEIVER's dc address over ssh;
    what the receiver got and from whom."""
    dest = sim.address(receiver)
    rx = subprocess.Popen(sim.ssh_argv(receiver, [PY, "-c", RECEIVE, dest,
                                                  str(port)]),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        assert rx.stdout.readline().strip() == "ready", rx.stderr.read()
        sim.run(sender, ["bash", "-c",
                         f"echo from-{sender} >/dev/udp/{dest}/{port}"])
        out, err = rx.communicate(timeout=30)
    finally:
        rx.kill()
        rx.wait()
    assert rx.returncode == 0, err
    return out.split()


def test_dc_network_carries_a_datagram_from_a_to_b(sim):
    route = sim.run("a", ["ip", "-j", "route", "get", sim.address("b")])
    hop = json.loads(route.stdout)[0]
    assert hop["dev"] == DC_DEVICE and hop["prefsrc"] == sim.address("a")
    assert "gateway" not in hop
    assert _udp(sim, "a", "b") == ["from-a", sim.address("a")]


def test_set_mtu_changes_both_ends_of_every_link(sim):
    def mtus():
        return sorted(
            [_link(sim.in_machine_argv(n, ["ip", "-j", "link", "show",
                                                "dev", DC_DEVICE]))["mtu"]
             for n in sim.names] +
            [_link(sim.in_switch_argv(["ip", "-j", "link", "show",
                                            "dev", f"dc-{n}"]))["mtu"]
             for n in sim.names])
    ends = 2 * len(sim.names)
    assert mtus() == [DEFAULT_MTU] * ends
    try:
        sim.set_mtu(1500)
        assert mtus() == [1500] * ends
    finally:
        sim.set_mtu(DEFAULT_MTU)
    assert mtus() == [DEFAULT_MTU] * ends


def _host_kernel_has_netem():
    """Asked apart from the sim: a netem on lo in a namespace of its own."""
    r = subprocess.run(["unshare", "--net", "tc", "qdisc", "add", "dev",
                        "lo", "root", "netem", "delay", "1ms"],
                       capture_output=True, text=True)
    return r.returncode == 0


def test_netem_shows_on_dc0_and_clear_removes_it(sim):
    def qdiscs(name):
        out = run(sim.in_machine_argv(
            name, ["tc", "-j", "qdisc", "show", "dev", DC_DEVICE])).stdout
        return [q["kind"] for q in json.loads(out)]
    if not _host_kernel_has_netem():
        # This machine's kernel (6.18, no modules) has none: the error
        # says so, in one line, and nothing changes.
        with pytest.raises(SimError, match="kernel has no netem") as e:
            sim.netem("a", "delay", "5ms")
        assert "\n" not in str(e.value)
        assert "netem" not in qdiscs("a")
        sim.clear_netem("a")
        return
    try:
        sim.netem("a", "delay", "5ms")
        assert "netem" in qdiscs("a") and "netem" not in qdiscs("b")
        shown = run(sim.in_machine_argv(
            "a", ["tc", "qdisc", "show", "dev", DC_DEVICE])).stdout
        assert "delay 5ms" in shown
        sim.netem("a", "loss", "1%")   # replaces it
        shown = run(sim.in_machine_argv(
            "a", ["tc", "qdisc", "show", "dev", DC_DEVICE])).stdout
        assert "loss 1%" in shown and "delay" not in shown
    finally:
        sim.clear_netem("a")
    assert "netem" not in qdiscs("a")
    sim.clear_netem("a")   # nothing there: no error


def test_three_machines_share_one_network():
    with SimMachines(("a", "b", "c"), name=_name()) as sim:
        assert [sim.address(n) for n in sim.names] == \
            ["198.18.0.1", "198.18.0.2", "198.18.0.3"]
        assert _udp(sim, "c", "a") == ["from-c", "198.18.0.3"]
        assert _udp(sim, "b", "c") == ["from-b", "198.18.0.2"]


# --- nothing left ------------------------------------------------------------

def test_down_leaves_nothing_even_with_processes_running_inside():
    links = _root_links()
    sshd_dir = os.path.lexists("/run/sshd")
    sim = SimMachines(name=_name()).up()
    try:
        # Nothing in the host's root network namespace or mount table,
        # even while it is up: no device, no namespace bound on a file.
        assert _root_links() == links
        assert _mounts_below(sim.dir) == []
        assert sorted(reaper.run_pids(sim.run_id)) == \
            sorted(proc.pids_with_tag(sim.tag)) != []
        # A daemon started over ssh, one that entered the machine's
        # network namespace alone (not its PID namespace).
        sim.run("a", ["sh", "-c", "setsid sleep 600 </dev/null >/dev/null "
                      "2>&1 &"])
        inside = _in_pidns(sim.pid("a"))
        assert len(inside) >= 2
        b_net = f"/proc/{sim.pid('b')}/ns/net"
        entered = subprocess.Popen(["nsenter", f"--net={b_net}", "sleep",
                                    "600"])
        _wait("nsenter to enter machine b's network namespace",
              lambda: os.readlink(f"/proc/{entered.pid}/ns/net") ==
              os.readlink(b_net))
    finally:
        sim.down()
    assert entered.wait(timeout=10) != 0
    assert [p for p, start in inside if proc.alive(p, start)] == []
    assert leftovers(sim) == []
    assert reaper.run_pids(sim.run_id) == []
    assert not sim.dir.exists()
    assert _root_links() == links
    assert os.path.lexists("/run/sshd") == sshd_dir
    sim.down()   # idempotent


@pytest.mark.parametrize("error", [
    CmdError(["ssh"], 255, "", "ssh: connect: refused"), KeyboardInterrupt()],
    ids=["error", "ctrl-c"])
def test_an_up_that_fails_at_its_last_step_leaves_nothing(monkeypatch, error):
    links = _root_links()
    sim = SimMachines(name=_name())
    seen = {}

    def fail(self, name, argv, **kw):
        seen["pids"] = proc.pids_with_tag(self.tag)
        raise error
    monkeypatch.setattr(SimMachines, "run", fail)
    with pytest.raises(type(error) if isinstance(error, KeyboardInterrupt)
                       else SimError) as e:
        sim.up()
    assert len(seen["pids"]) >= 3   # it had got that far
    if isinstance(error, CmdError):
        msg = str(e.value)
        assert "\n" not in msg
        assert msg.startswith(f"sim {sim.name}: reaching machine a by ssh")
        assert "refused" in msg
    assert leftovers(sim) == []
    assert not sim.dir.exists()
    assert _root_links() == links


def test_an_existing_sim_dir_is_refused_and_kept():
    name = _name()
    run_root().mkdir(mode=0o755, parents=True, exist_ok=True)
    held = run_root() / f"sim-{name}"
    held.mkdir(mode=0o700)
    try:
        with pytest.raises(SimError, match=f"{held} exists") as e:
            SimMachines(name=name).up()
        assert "\n" not in str(e.value)
        assert held.is_dir()
    finally:
        held.rmdir()
        remove_run_root()


def test_holders_killed_by_run_id_take_their_machines_with_them():
    sim = SimMachines(name=_name()).up()
    try:
        sim.run("a", ["sh", "-c", "setsid sleep 600 </dev/null >/dev/null "
                      "2>&1 &"])
        inside = _in_pidns(sim.pid("a"))
        # What the reaper does to a run's processes.
        proc.kill(reaper.run_pids(sim.run_id))
        assert reaper.run_pids(sim.run_id) == []
        _wait("machine a's processes to end",
              lambda: not any(proc.alive(p, s) for p, s in inside))
    finally:
        sim.down()
    assert leftovers(sim) == []


# --- the host untouched, seen from a sandbox ---------------------------------

SIM_IN_SANDBOX = """
import os, sys
from dcblab.lab.simmachines import SimMachines
with SimMachines(name=sys.argv[1]) as sim:
    sim.run("a", ["sh", "-c", "test -d /run/sshd && echo x >/run/dcblab/x"])
    sim.run("b", ["true"])
    print("up", sim.run_id, flush=True)
    if sys.argv[2] == "hang":
        sys.stdin.read()
"""


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox() as sb:
        yield sb


def test_a_sim_writes_nothing_on_the_host(sandbox):
    sb = sandbox
    assert sb.writes() == NOTHING, "the sandbox was not clean before"
    before = host_state(sb)
    r = sb.run([sys.executable, "-c", SIM_IN_SANDBOX, _name(), "run"],
               cwd=paths.ROOT, stdin=subprocess.DEVNULL, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("up ")
    assert not sb.path("/run/sshd").exists()
    assert sb.writes() == NOTHING
    assert diff_state(before, host_state(sb)) == {}


def test_a_killed_owner_leaves_a_directory_reap_removes(sandbox):
    sb = sandbox
    assert sb.writes() == NOTHING, "the sandbox was not clean before"
    before = host_state(sb)
    name = _name()
    owner = sb.popen([sys.executable, "-c", SIM_IN_SANDBOX, name, "hang"],
                     cwd=paths.ROOT, stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True)
    try:
        line = owner.stdout.readline().split()
        assert line[:1] == ["up"], owner.stderr.read()
        run_id = line[1]
        assert reaper.run_pids(run_id)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        sb.reap_orphans()
    # Its machines see their stdin close and end by themselves.
    _wait("the dead owner's machines to end",
          lambda: reaper.run_pids(run_id) == [])
    assert sb.path(f"/run/dcblab/sim-{name}").is_dir()
    r = sb.run([sys.executable, str(paths.ROOT / "bin" / "dcblab"), "reap"],
               cwd=paths.ROOT, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert f"sim-{name}" in r.stdout
    assert sb.writes() == NOTHING
    assert diff_state(before, host_state(sb)) == {}


def test_dcblab_sim_runs_a_command_with_the_machines_then_removes_them():
    """`dcblab sim -- CMD`: CMD reaches machine b by name through
    DCBLAB_SSH_CONFIG; its exit status is the command's; the machines
    and their directory are gone after."""
    r = subprocess.run(
        [sys.executable, str(paths.ROOT / "bin" / "dcblab"), "sim",
         "--name", "clisim", "--", "sh", "-c",
         'ssh -F "$DCBLAB_SSH_CONFIG" b hostname; exit 3'],
        capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stderr
    assert r.stdout.strip() == "b"
    assert "machines a, b up" in r.stderr
    assert not (run_root() / "sim-clisim").exists()
