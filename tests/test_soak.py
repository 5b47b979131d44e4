"""The soak's own machinery (dcblab/scenarios/soak.py, its census in
dcblab/testing/census.py) can fail: each kind of leftover it promises to
count is made here on purpose and must be counted, and a soak whose cycle
leaks stops there with a report naming the cycle, the seed, the kill and
the leak. Most leftovers are made without a guest (a process named as
QEMU is, a zombie, a netns bound in the sandbox with a tap in it, a run
directory, an open file); one real lab left up shows that a census sees
what a lab is made of.
"""

import json
import os
import subprocess
import sys
import time
from collections import Counter

import pytest

from dcblab.core import paths
from dcblab.scenarios.soak import (BACKENDS, DEFAULT_CLEAN, DEFAULT_KILLED,
                                   KILL_WINDOW_S, PHASES, VICTIMS,
                                   CycleResult, Kill, Soak, plan)
from dcblab.testing.census import Watch
from dcblab.testing.sandbox import Sandbox
from dcblab.topology import load

DCBLAB = [sys.executable, str(paths.ROOT / "bin" / "dcblab")]
# A process that renames itself (prctl PR_SET_NAME, as comm shows it) and
# waits for its stdin to close; with "zombie", it forks a child that does
# so and exits, and reaps it only when its own stdin closes.
_NAMED = r"""
import ctypes, os, sys
name, how = sys.argv[1].encode(), sys.argv[2]
def rename():
    ctypes.CDLL(None).prctl(15, name, 0, 0, 0)
if how == "zombie":
    pid = os.fork()
    if pid == 0:
        rename()
        os._exit(0)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
else:
    rename()
print("ready", flush=True)
sys.stdin.read()
if how == "zombie":
    os.waitpid(pid, 0)
"""


def _named(name, how="running", *extra):
    p = subprocess.Popen([sys.executable, "-c", _NAMED, name, how, *extra],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline() == "ready\n"
    return p


def _end(p):
    p.stdin.close()
    p.wait(10)
    if p.stdout:
        p.stdout.close()


@pytest.fixture
def sandbox():
    with Sandbox() as sb:
        yield sb


# --- the census --------------------------------------------------------------

def test_census_counts_a_running_qemu_and_a_zombie_one():
    watch = Watch()
    assert watch.census().clean()
    running = _named("qemu-system-x86")
    zombie = _named("qemu-system-x86", "zombie")
    daemon = _named("libvirtd")
    try:
        c = watch.census()
    finally:
        for p in (running, zombie, daemon):
            _end(p)
    # Two QEMUs (one of them a zombie, found by its comm, its command line
    # gone), one libvirtd, and the zombie's parent, a plain process.
    assert c.counts()["qemu"] == 2
    assert c.counts()["libvirtd"] == 1
    assert c.counts()["processes"] == 1
    assert [p.state for p in c.processes if p.comm == "qemu-system-x86"
            and p.ppid == zombie.pid] == ["Z"]
    assert watch.census().clean()


_CENSUS_ELSEWHERE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from dcblab.testing.census import Watch
w = Watch()
print(json.dumps([w.census(run_ids=sys.argv[2:]).counts()["processes"],
                  w.census().counts()["processes"]]))
"""


def test_census_finds_a_process_of_a_seen_run_outside_its_tree():
    """A process that is not the driver's descendant counts by its run id
    only (and not at all without it: other people's labs never do)."""
    rid = "5eed0f5eed0f"
    p = subprocess.Popen([sys.executable, "-c", "import sys; "
                          "sys.stdin.read()", f"dcblab.run={rid}"],
                         stdin=subprocess.PIPE)
    try:
        r = subprocess.run([sys.executable, "-c", _CENSUS_ELSEWHERE,
                            str(paths.ROOT), rid], capture_output=True,
                           text=True, timeout=60)
    finally:
        _end(p)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [1, 0]


def test_census_counts_an_open_descriptor_of_the_driver():
    watch = Watch()
    f = open(os.devnull)
    try:
        assert watch.census().fds == 1
        assert watch.census().leaks()["fds"] == ["+1 open in the driver"]
    finally:
        f.close()
    assert watch.census().fds == 0


def test_census_sees_a_run_dir_and_a_bound_netns_with_a_tap(sandbox):
    watch = Watch(sandbox)
    assert watch.census().clean()
    d = "/run/dcblab/soak-x"
    r = sandbox.run(["sh", "-c", f"mkdir -p {d} && touch {d}/netns && "
                     f"unshare --net={d}/netns true && "
                     f"nsenter --net={d}/netns ip tuntap add dev soak-tap "
                     "mode tap"])
    assert r.returncode == 0, r.stderr
    c = watch.census(names=["soak-x"])
    leaks = c.leaks()
    assert leaks["run dirs"] == ["/run/dcblab (the run root, sandbox)",
                                 f"{d} (sandbox)"]
    assert leaks["mounts"] == [f"{d}/netns (nsfs, sandbox)"]
    ino = os.stat(sandbox.path(f"{d}/netns")).st_ino
    assert leaks["netns"] == [f"net:[{ino}] bound on {d}/netns (sandbox)"]
    assert leaks["taps"] == [f"soak-tap (in net:[{ino}])"]
    assert f"added {d}/netns" in leaks["writes"]
    # The tap never reached the root namespace.
    assert c.counts()["taps"] == 1


def test_census_sees_a_lab_left_up(sandbox):
    """A real lab (qemu backend) not taken down: its QEMUs, keeper and
    guard, its netns (bound and held), its taps, its run dir, the mount."""
    topo = load(paths.default_topology())
    watch = Watch(sandbox)
    name = "soak-left"
    r = sandbox.run(DCBLAB + ["up", "--name", name], cwd=paths.ROOT,
                    env={**os.environ, "DCBLAB_BACKEND": "qemu"},
                    stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    try:
        c = watch.census(names=[name])
    finally:
        r = sandbox.run(DCBLAB + ["down", "--name", name], cwd=paths.ROOT,
                        stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    counts = c.counts()
    assert counts["qemu"] == len(topo.hosts)
    assert sorted(p.comm for p in c.processes
                  if p.comm != "qemu-system-x86") == ["python3", "python3"]
    ends = [f"{n.host}-{n.name}" for lk in topo.links for n in (lk.a, lk.b)]
    assert sorted(t.split(" ")[0] for t in c.taps) == sorted(ends)
    # One namespace, bound on its file and held by the lab's processes.
    assert len(c.netns) == 1
    assert f"bound on /run/dcblab/{name}/netns (sandbox)" in c.netns[0]
    assert " held by pid " in c.netns[0]
    assert f"/run/dcblab/{name} (sandbox)" in c.run_dirs
    assert any(w.startswith(f"added /run/dcblab/{name}/") for w in c.writes)
    _wait_clean(watch, name)


def _wait_clean(watch, name, timeout=10):
    deadline = time.monotonic() + timeout
    while not (c := watch.census(names=[name])).clean():
        assert time.monotonic() < deadline, c.summary()
        time.sleep(0.2)


# --- the plan ----------------------------------------------------------------

def test_a_seed_gives_the_same_plan_and_another_seed_another():
    assert plan(7) == plan(7)
    assert plan(7) != plan(8)


def _combos(cycles):
    return [(c.victim, c.backend, c.phase) for c in cycles
            if c.kind == "killed"]


def test_killed_cycles_take_every_combination_before_any_twice():
    every = {(v, b, ph) for v in VICTIMS for b in BACKENDS
             for ph in PHASES[v]}
    for n in (len(every) - 3, len(every), len(every) + 3):
        got = Counter(_combos(plan(99, clean=5, killed=n)))
        assert sum(got.values()) == n
        counts = [got[c] for c in every]
        assert max(counts) - min(counts) <= 1, got


def test_default_plan_kills_every_victim_on_every_backend_in_each_phase():
    cycles = plan(2024)
    clean = [c for c in cycles if c.kind == "clean"]
    killed = [c for c in cycles if c.kind == "killed"]
    assert (len(clean), len(killed)) == (DEFAULT_CLEAN, DEFAULT_KILLED)
    assert set(_combos(cycles)) == {(v, b, ph) for v in VICTIMS
                                    for b in BACKENDS for ph in PHASES[v]}
    assert all(0 <= c.kill_at <= KILL_WINDOW_S[c.victim, c.phase]
               for c in killed)
    # Clean cycles alternate the backends; killed ones are spread out
    # (no two in a row while there are clean cycles between them to put).
    assert all(a.backend != b.backend for a, b in zip(clean, clean[1:]))
    kinds = [c.kind for c in cycles]
    assert "killed,killed" not in ",".join(kinds)
    assert [c.n for c in cycles] == list(range(1, len(cycles) + 1))


# --- the soak stops at the first leak ----------------------------------------

class _Leaky(Soak):
    """Cycles without a lab: clean ones leave nothing, killed ones leave
    a process named as QEMU is and a run directory in the sandbox."""

    def clean(self, cp):
        return CycleResult(cp, f"soak-{cp.n}", up_s=0.0, down_s=0.0)

    def killed(self, cp):
        res = CycleResult(cp, f"soak-{cp.n}", kill=Kill(cp.victim, cp.when()))
        self.names.add(res.lab)
        self.leaked = _named("qemu-system-x86")
        r = self.sb.run(["mkdir", "-p", f"/run/dcblab/{res.lab}"])
        assert r.returncode == 0, r.stderr
        res.kill.at, res.kill.pid = 1.25, self.leaked.pid
        res.kill.lab_status = "up"
        return res


def test_a_leaking_cycle_stops_the_soak_with_a_one_line_report(sandbox):
    cycles = plan(11, clean=2, killed=1)
    soak = _Leaky(sandbox, cycles, 11, budget_s=600)
    r = soak.run()
    bad = next(c for c in cycles if c.kind == "killed")
    assert r.stopped == "leak"
    assert [c.plan for c in r.cycles] == cycles[:bad.n]
    assert r.leaks == 1
    assert "\n" not in r.report
    assert r.report.startswith(f"cycle {bad.n} of {len(cycles)} (killed, "
                               f"{bad.backend} backend, lab soak-{bad.n}) "
                               "of seed 11 leaked: ")
    assert f"qemu: qemu-system-x86 pid {soak.leaked.pid}" in r.report
    assert f"/run/dcblab/soak-{bad.n} (sandbox)" in r.report
    assert f"{bad.victim} (pid {soak.leaked.pid}) SIGKILLed 1.25 s after " \
        f"the cycle's start (planned {bad.when()}" in r.report
    assert r.report.endswith("replay: dcblab soak --seed 11 --clean 2 "
                             "--killed 1")
    # And it removed what the cycle left.
    assert soak.leaked.poll() is not None
    assert not sandbox.path("/run/dcblab").exists()


def test_the_budget_stops_the_soak_before_a_cycle_that_would_not_fit(
        sandbox):
    r = _Leaky(sandbox, plan(3, clean=2, killed=0), 3, budget_s=1.0).run()
    assert (r.stopped, r.cycles) == ("budget", [])


@pytest.mark.parametrize("args, text", [
    (["--clean", "0", "--killed", "0"],
     "--clean 0 --killed 0: want counts >= 0, not both 0"),
    (["--killed", "-1"], f"--clean {DEFAULT_CLEAN} --killed -1: want "
     "counts >= 0, not both 0"),
    (["--budget", "0"], "--budget 0.0: want seconds > 0")])
def test_soak_mistakes_are_one_line_exit_2(args, text):
    r = subprocess.run(DCBLAB + ["soak", *args], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (r.returncode, r.stdout, r.stderr) == \
        (2, "", f"dcblab: soak: {text}\n")
