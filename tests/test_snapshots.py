"""Labs from snapshots (dcblab/lab/snapshots.py, docs/lab.md): the first
`up` of a topology boots cold and saves its ready guests, later ups
restore them; what a restored lab keeps and what it gets new. Each test
uses a copy of two-hosts.toml under a name of its own, so its snapshot
slot is its own and is removed at the end. The tests taking ``backend``
run on both backends whatever the session's: the qemu backend saves
with a QMP migrate and restores with -incoming, the libvirt one with
virDomainSave and virDomainRestoreFlags (and restores the saving lab's
guests at once: libvirt's save stops them)."""

import itertools
import json
import os
import subprocess
import sys
import time

import pytest

from dcblab.core.flavours import flavour
from dcblab.core.paths import ROOT
from dcblab.guest.console import find_splats
from dcblab.lab import Lab, leftovers, run_pids, snapshots
from dcblab.topology import load


# The session's kernel flavour: a snapshot's slot names it (FLAVOUR=debug
# in CI's debug pass).
FLAVOUR = flavour().name
_N = itertools.count()


@pytest.fixture
def topo(tmp_path):
    """two-hosts.toml as `snap-PID-N`, and its slot removed afterwards."""
    src = (ROOT / "topology" / "two-hosts.toml").read_text()
    name = f"snap-{os.getpid()}-{next(_N)}"
    path = tmp_path / f"{name}.toml"
    path.write_text(src.replace('name = "two-hosts"', f'name = "{name}"'))
    t = load(path)
    yield t
    for backend in ("qemu", "libvirt"):
        slot = snapshots.slot_name(t.name, backend, FLAVOUR)
        if (snapshots.store() / slot).exists():
            snapshots.remove([slot])


@pytest.fixture(params=["qemu", "libvirt"])
def backend(request):
    return request.param


class Labs:
    """Labs up in a test, all down at its end (and nothing left)."""

    def __init__(self):
        self.labs = []

    def up(self, topology, name, backend="qemu", **kw):
        lab = Lab(topology, name, backend=backend)
        self.labs.append(lab)
        lab.up(owner_pid=os.getpid(), **kw)
        return lab

    def down(self):
        """(splats on the labs' consoles, what their downs left)."""
        splats, left = [], []
        for lab in self.labs:
            for host in lab.topology.hosts:
                log = lab.dir / host.name / "console.log"
                if log.exists():
                    splats += [f"{lab.name}:{host.name}: {s}" for s in
                               find_splats(log.read_text(errors="replace"))]
            lab.down()
            left += leftovers(lab.name, lab.run_id)
        return splats, left


@pytest.fixture
def labs():
    """Labs of the test's own; their consoles are watched as the
    fixtures' are (no splat), and nothing of them stays."""
    ls = Labs()
    yield ls
    assert ls.down() == ([], [])


def _run(lab, host, argv):
    return lab.machine(host).run(argv).stdout


def _macs(lab, host="h1"):
    return _run(lab, host, ["cat", "/sys/class/net/eth0/address"]).strip()


def _qemus(run_id):
    """The QEMUs carrying the run id (the libvirt backend's libvirtd
    carries it too)."""
    def exe(pid):
        try:
            return os.readlink(f"/proc/{pid}/exe")
        except OSError:
            return ""
    return sorted(p for p in run_pids(run_id)
                  if os.path.basename(exe(p)).startswith("qemu-system"))


def _pings(lab, topo, vlan):
    """h1 pings h2, untagged or on the VLAN (QEMU 7.2 lost a restored
    NIC's VLAN filter: ctrl_vlan=off on both backends)."""
    out = _run(lab, "h1", ["ping", "-4", "-c", "2", "-i", "0.05", "-W",
                           "2", topo.address("h2", vlan=vlan)])
    assert "2 packets received" in out, out


def test_first_up_saves_the_next_restores_the_same_guests(topo, labs,
                                                           backend):
    """The first up boots cold and saves, and its guests carry on (on
    libvirt: restored at once from what was saved, new QEMUs whose pids
    state.json has); `dcblab snapshots` lists the slot. The second up
    restores: its guests have the first lab's MACs (the snapshot's),
    answer on a new wire (their own netns), reach each other untagged
    and on the VLAN, have the host's wall clock, and say in their kernel
    log (their new console) that they were restored. A third restored
    lab, up beside both, draws other random bytes than the second."""
    a = labs.up(topo, f"{topo.name}-a", backend)
    assert a.state["snapshot"]["restored"] is False
    assert a.state["snapshot"]["saved"] is True
    assert "init" in a.timings["h1"] and "restore" not in a.timings["h1"]
    # The saving lab after its save: every guest's QEMU is the one
    # state.json names, it answers, and the VLAN still passes.
    assert sorted(e["pid"] for e in a.state["hosts"].values()) == \
        sorted(_qemus(a.run_id))
    for vlan in (None, 100):
        _pings(a, topo, vlan)
    slot = a.state["snapshot"]["slot"]
    assert slot == snapshots.slot_name(topo.name, backend, FLAVOUR)
    r = subprocess.run([sys.executable, str(ROOT / "bin" / "dcblab"),
                        "snapshots", "-j"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    (row,) = [x for x in json.loads(r.stdout)["snapshots"]
              if x["name"] == slot]
    assert (row["key"], row["hosts"], row["lab"]) == (
        a.state["snapshot"]["key"], ["h1", "h2"], a.name)
    b = labs.up(topo, f"{topo.name}-b", backend)
    snap = b.state["snapshot"]
    assert (snap["restored"], snap["saved"]) == (True, False)
    assert snap["key"] == a.state["snapshot"]["key"]
    assert "restore" in b.timings["h1"] and "init" not in b.timings["h1"]
    assert b.state["mac_seed"] == a.name
    assert _macs(b) == _macs(a) == b.wire.mac(topo.host("h1").nic("eth0"))
    assert b.wire.netns != a.wire.netns
    assert b.state["backend"] == backend
    assert sorted(e["pid"] for e in b.state["hosts"].values()) == \
        sorted(_qemus(b.run_id))
    for vlan in (None, 100):
        _pings(b, topo, vlan)
    before = time.time()
    guest_now = int(_run(b, "h2", ["date", "+%s"]))   # whole seconds
    assert int(before) - 1 <= guest_now <= time.time() + 1
    # Its kernel booted once, in lab a: uptime carries on from the save
    # (a few seconds), not from a boot of its own.
    console = (b.dir / "h1" / "console.log").read_text()
    assert "dcblab-init: started" not in console
    assert f"dcblab: restored from snapshot {snap['slot']} (key " \
        f"{snap['key']})" in console
    # A third lab from the same snapshot, all three up at once with the
    # same MACs (each in its own netns): it resumes with b's CRNG, yet
    # they read different bytes from /dev/urandom. The keeper reseeds
    # each from host bytes (tools/rngseed.c); the kernel also reseeds by
    # itself, every uptime/2 s in a guest's first minutes (6.1's
    # crng_has_old_seed), which is when these snapshots are taken:
    # without rngseed they differed too, in the one run tried. rngseed
    # makes it hold from the first read whatever the saved uptime.
    c = labs.up(topo, f"{topo.name}-c", backend)
    assert c.state["snapshot"]["restored"] is True
    assert _macs(c) == _macs(a)
    read = ["sh", "-c", "head -c 16 /dev/urandom | od -An -tx1"]
    assert _run(b, "h1", read) != _run(c, "h1", read)


def test_rngseed_reseeds_and_refuses_too_few_bytes(topo, labs):
    """The tool the keeper runs after a restore: 64 bytes are credited
    and the CRNG reseeded (RNDRESEEDCRNG answered: exit 0); 4 bytes are
    a usage error, nothing written."""
    a = labs.up(topo, f"{topo.name}-a", cold=True)
    g = a.machine("h1")
    ok = g.run(["rngseed"], input=os.urandom(64), check=False)
    assert (ok.rc, ok.stderr) == (0, "")
    short = g.run(["rngseed"], input=os.urandom(4), check=False)
    assert short.rc == 2
    assert short.stderr.startswith("rngseed: 4 bytes on stdin, at least "
                                   "8 wanted")


def test_cold_neither_restores_nor_saves(topo, labs, backend):
    a = labs.up(topo, f"{topo.name}-a", backend, cold=True)
    assert a.state["snapshot"] is None
    assert "init" in a.timings["h1"] and "restore" not in a.timings["h1"]
    assert not (snapshots.store() /
                snapshots.slot_name(topo.name, backend, FLAVOUR)).exists()


def test_a_changed_topology_boots_cold_and_replaces_the_snapshot(
        topo, labs, tmp_path):
    a = labs.up(topo, f"{topo.name}-a")
    changed = tmp_path / "changed.toml"
    changed.write_text(open(topo.path).read() + "# one more line\n")
    b = labs.up(load(changed), f"{topo.name}-b")
    assert b.state["snapshot"]["restored"] is False
    assert b.state["snapshot"]["saved"] is True
    assert b.state["snapshot"]["key"] != a.state["snapshot"]["key"]
    (row,) = [r for r in snapshots.listing() if r["name"] ==
              b.state["snapshot"]["slot"]]
    assert row["key"] == b.state["snapshot"]["key"]


# What each backend says of a state it cannot load. libvirt reads its
# header (and the domain XML in it) before QEMU starts: a state cut short
# there fails in start(), one cut further on when QEMU loads it.
CANNOT_LOAD = {"qemu": (4096, "h2: QEMU exited"),
               "libvirt": (1 << 20, "h2: libvirt could not restore the "
                                    "saved state: internal error: qemu "
                                    "unexpectedly closed the monitor")}


def test_a_snapshot_qemu_cannot_load_is_removed_and_the_lab_boots_cold(
        topo, labs, backend):
    a = labs.up(topo, f"{topo.name}-a", backend)
    slot = a.state["snapshot"]["slot"]
    size, says = CANNOT_LOAD[backend]
    state = snapshots.store() / slot / "h2.state"
    state.write_bytes(state.read_bytes()[:size])
    lines = []
    b = Lab(topo, f"{topo.name}-b", backend=backend)
    labs.labs.append(b)
    b.up(owner_pid=os.getpid(), progress=lines.append)
    assert b.state["snapshot"]["restored"] is False
    said = [ln for ln in lines if "not restored" in ln]
    assert len(said) == 1 and said[0].startswith(
        f"snapshot {slot}: not restored ({says}"), said
    assert said[0].endswith("): removed; booting cold")
    assert b.state["snapshot"]["saved"] is True
    assert _run(b, "h2", ["true"]) == ""
