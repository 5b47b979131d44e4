"""The soak: many labs up and down, some killed outright, and after every
one a census of what is left on the host, which must be nothing.

A run is a plan drawn from a seed (``plan()``): CLEAN cycles of ``dcblab
up``, ``dcblab exec h1 -- true`` and ``dcblab down``, and KILLED cycles in
which one victim gets SIGKILL at a time drawn from the seed, then, once
nobody owns the lab any more, ``dcblab reap``. The victims:

* ``up``: killed while it waits for the lab (its keeper sees its pipe's
  reader gone and undoes the bring-up by itself);
* the keeper: during the bring-up or while the lab is up and
  ``dcblab exec`` runs in it (its guard tears the run down);
* a pytest session whose ``lab`` fixture is starting the lab or whose
  test is running in it (the keeper sees its owner gone).

Clean cycles alternate between the qemu and the libvirt backend; the
killed cycles take every (victim, backend, phase) once before any twice
(PHASES: in the bring-up, or once the lab is ready).
Everything runs in a Sandbox (dcblab.testing.sandbox), so a file written
outside the build directory counts as a leak too; the census is
dcblab.testing.census. The first cycle whose census is not empty, or
whose step failed, ends the soak with a one-line report naming the cycle,
the seed, the kill and what was left; the soak then removes what it can.
A budget (seconds) stops the soak from starting a cycle that would not
end within it, judged by the longest cycle of that kind so far.
"""

import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core import paths, proc
from ..core.errors import DcblabError
from ..lab import owned, run_root
from ..testing.census import Watch, descendants, process_table
from ..testing.sandbox import Sandbox

__all__ = ["soak", "plan", "Soak", "SoakResult", "CycleResult", "CyclePlan",
           "Kill", "BACKENDS", "VICTIMS", "PHASES", "KILL_WINDOW_S",
           "DEFAULT_CLEAN", "DEFAULT_KILLED", "DEFAULT_BUDGET_S", "SETTLE_S",
           "CENSUS_GRACE_S"]

BACKENDS = ("qemu", "libvirt")
VICTIMS = ("up", "keeper", "pytest")
# When a victim is killed: while the lab comes up ("bring-up", timed from
# the cycle's start), or once it is ready ("up", timed from then: the
# keeper serving `dcblab exec`s, the pytest session in its test). `up`
# only lives in the bring-up.
PHASES = {"up": ("bring-up",), "keeper": ("bring-up", "up"),
          "pytest": ("bring-up", "up")}
# The kill comes at most this many seconds after its phase began. An
# unloaded `dcblab up` takes 4-6 s here, a pytest session ~1.5 s more
# before its fixture starts the lab; under load, longer, so a bring-up
# kill may come earlier in the bring-up but never after it, except on a
# machine faster than this one (then the kill shows the lab "up", and an
# `up` victim is missed: it had exited).
KILL_WINDOW_S = {("up", "bring-up"): 4.0, ("keeper", "bring-up"): 4.0,
                 ("pytest", "bring-up"): 6.0, ("keeper", "up"): 3.0,
                 ("pytest", "up"): 3.0}
DEFAULT_CLEAN, DEFAULT_KILLED = 20, 10
DEFAULT_BUDGET_S = 600.0
# How long a killed lab's own processes may take to remove it (the lab's
# run directory no longer held) before the soak calls it stuck.
SETTLE_S = 60.0
# A census that is not clean is taken again for this long: a QEMU
# re-parented to the driver is reaped by the sandbox's thread within 0.1 s.
CENSUS_GRACE_S = 3.0
# Before any cycle of a kind has run, the budget assumes it takes this long.
_FIRST_GUESS_S = {"clean": 20.0, "killed": 40.0}
_CMD_TIMEOUT_S = 300

DCBLAB = [sys.executable, str(paths.ROOT / "bin" / "dcblab")]
_INNER_TEST = '''"""The pytest session `dcblab soak` kills: its lab
fixture starts the lab, then this keeps the lab busy until the session is
killed (written by dcblab/scenarios/soak.py)."""
import time


def test_keeps_the_lab_busy(lab):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        lab.h1.run(["true"])
'''


class SoakError(DcblabError):
    """The soak could not run (not a leak: that is a result)."""


@dataclass(frozen=True)
class CyclePlan:
    n: int                 # 1-based
    kind: str              # "clean" or "killed"
    backend: str
    victim: str = None     # killed: "up", "keeper" or "pytest"
    phase: str = None      # killed: "bring-up" or "up" (PHASES)
    kill_at: float = None  # killed: seconds after its phase began

    def when(self):
        """"2.31 s into the bring-up", "0.40 s after ready"."""
        if self.phase == "up":
            return f"{self.kill_at:.2f} s after ready"
        return f"{self.kill_at:.2f} s into the bring-up"


def _combos():
    return [(v, b, ph) for v in VICTIMS for b in BACKENDS
            for ph in PHASES[v]]


def plan(seed, clean=DEFAULT_CLEAN, killed=DEFAULT_KILLED):
    """The cycles of a soak, all drawn from SEED: the same seed gives the
    same kinds, backends, victims, phases and kill times. The killed
    cycles take every (victim, backend, phase) before any twice (ten
    combinations: the default's ten killed cycles take each once), and
    are spread evenly among the clean ones, so a budget that stops the
    soak early still leaves both kinds run."""
    rng = random.Random(seed)
    picks = []
    while len(picks) < killed:
        combos = _combos()
        rng.shuffle(combos)
        picks += combos
    picks = picks[:killed]
    rng.shuffle(picks)
    first = rng.randrange(len(BACKENDS))
    cleans = [BACKENDS[(first + i) % len(BACKENDS)] for i in range(clean)]
    total = clean + killed
    killed_at = {int((i + 0.5) * total / killed) for i in range(killed)}
    cycles = []
    for i in range(total):
        if i in killed_at:
            victim, backend, phase = picks.pop()
            t = round(rng.uniform(0.0, KILL_WINDOW_S[victim, phase]), 2)
            cycles.append(CyclePlan(i + 1, "killed", backend, victim, phase,
                                    t))
        else:
            cycles.append(CyclePlan(i + 1, "clean", cleans.pop(0)))
    return cycles


@dataclass
class Kill:
    """What a killed cycle's SIGKILL hit."""
    victim: str
    planned: str             # CyclePlan.when()
    at: float = None         # sent, seconds after the cycle's start; None:
    pid: int = None          # not sent
    ready: float = None      # the lab was ready, seconds after the start
    lab_status: str = ""     # the lab's state.json status at the kill
    last_line: str = ""      # the last line `up` or pytest printed before
    missed: str = ""         # why nothing was killed
    settle_s: float = None   # kill -> the lab's run directory unheld

    def describe(self):
        if self.at is None:
            return f"{self.victim} not killed ({self.missed})"
        line = f"; last line {self.last_line!r}" if self.last_line else ""
        ready = f", ready at {self.ready:.2f} s" if self.ready else ""
        return (f"{self.victim} (pid {self.pid}) SIGKILLed {self.at:.2f} s "
                f"after the cycle's start (planned {self.planned}{ready}; "
                f"lab {self.lab_status}{line})")


@dataclass
class CycleResult:
    plan: CyclePlan
    lab: str
    seconds: float = 0.0
    up_s: float = None
    down_s: float = None
    kill: Kill = None
    reaped: int = None       # runs `dcblab reap` removed after a kill
    census: object = None    # dcblab.testing.census.Census
    error: str = ""          # a step that failed (not a leak)

    @property
    def leaked(self):
        return self.census is not None and not self.census.clean()

    def as_dict(self):
        d = {k: _rounded(v) for k, v in asdict(self).items()
             if k != "census"}
        d["census"] = self.census.as_dict() if self.census else None
        return d


@dataclass
class SoakResult:
    seed: int
    planned: list
    budget_s: float
    cycles: list = field(default_factory=list)
    seconds: float = 0.0
    stopped: str = ""        # "", "budget", "leak" or "failure"
    report: str = ""         # the one-line report of a leak or failure
    fds_start: int = 0
    fds_end: int = 0
    file_handles_start: int = 0
    file_handles_end: int = 0
    load_start: tuple = ()
    load_end: tuple = ()
    other_qemus: int = 0     # QEMUs of others running as the soak began

    @property
    def leaks(self):
        return sum(c.leaked for c in self.cycles)

    def ups(self, backend=None):
        return [c.up_s for c in self.cycles if c.up_s is not None and
                c.plan.kind == "clean" and backend in (None, c.plan.backend)]

    def downs(self, backend=None):
        return [c.down_s for c in self.cycles if c.down_s is not None and
                backend in (None, c.plan.backend)]

    def settles(self):
        return [c.kill.settle_s for c in self.cycles
                if c.kill and c.kill.settle_s is not None]

    def kinds(self):
        """{"clean": n, "killed": n} of the cycles run."""
        out = {"clean": 0, "killed": 0}
        for c in self.cycles:
            out[c.plan.kind] += 1
        return out

    def as_dict(self):
        med = _median
        return {
            "seed": self.seed, "planned": len(self.planned),
            "budget_s": self.budget_s, "ran": len(self.cycles),
            "kinds": self.kinds(), "seconds": round(self.seconds, 2),
            "stopped": self.stopped, "report": self.report,
            "leaks": self.leaks,
            "up_median_s": med(self.ups()),
            "up_median_s_by_backend": {b: med(self.ups(b)) for b in BACKENDS},
            "down_median_s": med(self.downs()),
            "settle_median_s": med(self.settles()),
            "fds": [self.fds_start, self.fds_end],
            "file_handles": [self.file_handles_start, self.file_handles_end],
            "load": [[round(x, 2) for x in self.load_start],
                     [round(x, 2) for x in self.load_end]],
            "other_qemus": self.other_qemus,
            "cycles": [c.as_dict() for c in self.cycles]}


def _rounded(v):
    if isinstance(v, float):
        return round(v, 3)
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    return v


def _median(values):
    return round(statistics.median(values), 3) if values else None


def _last_line(text):
    lines = [x for x in (text or "").strip().splitlines() if x.strip()]
    return lines[-1] if lines else ""


class _Output:
    """A child's merged stdout/stderr, read by a thread, with the time of
    each line since T0."""

    def __init__(self, pipe, t0):
        self.lines = []
        self.t0 = t0
        self.thread = threading.Thread(target=self._read, args=(pipe,),
                                       daemon=True)
        self.thread.start()

    def _read(self, pipe):
        for line in pipe:
            self.lines.append((time.monotonic() - self.t0, line.rstrip()))
        pipe.close()

    def last_before(self, t):
        before = [line for at, line in self.lines if at <= t and line]
        return before[-1] if before else ""

    def text(self):
        return "\n".join(line for _, line in self.lines)


class Soak:
    """One soak run in SANDBOX; say(str) is told what happens, and
    on_cycle(CycleResult) gets each cycle as it ends."""

    def __init__(self, sandbox, cycles, seed, budget_s, on_cycle=None):
        self.sb = sandbox
        self.cycles = cycles
        self.seed = seed
        self.budget_s = budget_s
        self.on_cycle = on_cycle or (lambda c: None)
        self.names, self.run_ids = set(), set()
        self.inner = paths.build_dir() / "soak-pytest"
        self.watch = None

    # --- running things in the sandbox ---------------------------------------

    def _env(self, backend, **extra):
        env = {k: v for k, v in os.environ.items() if k != "DCBLAB_LAB"}
        return {**env, "DCBLAB_BACKEND": backend, **extra}

    def dcblab(self, args, backend, timeout=_CMD_TIMEOUT_S):
        return self.sb.run(DCBLAB + args, cwd=paths.ROOT,
                           env=self._env(backend), stdin=subprocess.DEVNULL,
                           timeout=timeout)

    def _lab_dir(self, name):
        return self.sb.path(run_root() / name)

    def _status(self, name):
        d = self._lab_dir(name)
        try:
            text = (d / "state.json").read_text()
        except FileNotFoundError:
            return "no state yet" if d.exists() else "not made yet"
        except OSError as e:
            return f"unreadable ({e})"
        m = re.search(r'"run_id": "([0-9a-f]+)"', text)
        if m:
            self.run_ids.add(m.group(1))
        m = re.search(r'"status": "([a-z ]+)"', text)
        return m.group(1) if m else "state being written"

    def _keeper_pid(self, name):
        """The keeper proper of lab NAME (the guard's child), among this
        soak's processes only."""
        table = process_table()
        ours = descendants(os.getpid(), table)
        for pid in ours:
            ppid = table[pid].ppid
            if ppid in ours and all(
                    self._is_keeper(p, name) for p in (pid, ppid)):
                return pid
        return None

    @staticmethod
    def _is_keeper(pid, name):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return b"dcblab.lab.keeper" in argv and name.encode() in argv

    # --- the cycles ----------------------------------------------------------

    def clean(self, cp):
        res = CycleResult(cp, f"soak-{cp.n}")
        self.names.add(res.lab)
        t = time.monotonic()
        r = self.dcblab(["up", "--name", res.lab], cp.backend)
        took = time.monotonic() - t
        self._status(res.lab)
        if r.returncode != 0:
            res.error = f"`dcblab up` exited {r.returncode} after " \
                        f"{took:.2f} s: {_last_line(r.stderr)}"
            return res
        res.up_s = took
        r = self.dcblab(["exec", "--name", res.lab, "h1", "--", "true"],
                        cp.backend, timeout=60)
        if r.returncode != 0:
            res.error = f"`dcblab exec h1 -- true` exited {r.returncode}: " \
                        f"{_last_line(r.stderr)}"
        t = time.monotonic()
        r = self.dcblab(["down", "--name", res.lab], cp.backend)
        res.down_s = time.monotonic() - t
        if r.returncode != 0 and not res.error:
            res.error = f"`dcblab down` exited {r.returncode}: " \
                        f"{_last_line(r.stderr)}"
        return res

    def _start_victim(self, cp, t0):
        if cp.victim == "pytest":
            self.inner.mkdir(parents=True, exist_ok=True)
            test = self.inner / "test_soak_inner.py"
            if not test.exists() or test.read_text() != _INNER_TEST:
                test.write_text(_INNER_TEST)
            argv = [sys.executable, "-m", "pytest", "-q", "-p",
                    "no:cacheprovider", "-p", "dcblab.testing.plugin",
                    f"--confcutdir={self.inner}", str(self.inner)]
            cwd, env = self.inner, self._env(cp.backend,
                                             PYTHONPATH=str(paths.ROOT))
        else:
            argv = DCBLAB + ["up", "--name", f"soak-{cp.n}"]
            cwd, env = paths.ROOT, self._env(cp.backend)
        p = self.sb.popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          text=True)
        return p, _Output(p.stdout, t0)

    def _serve_execs(self, up, name, backend, stop):
        """While the keeper is not yet killed: once `up` is done, execs in
        the lab, so that the kill may land in one."""
        while up.poll() is None and not stop.wait(0.05):
            pass
        while up.returncode == 0 and not stop.is_set():
            self.dcblab(["exec", "--name", name, "h1", "--", "true"],
                        backend, timeout=30)

    def killed(self, cp):
        t0 = time.monotonic()
        p, out = self._start_victim(cp, t0)
        name = f"pytest-{p.pid}" if cp.victim == "pytest" else f"soak-{cp.n}"
        res = CycleResult(cp, name, kill=Kill(cp.victim, cp.when()))
        self.names.add(name)
        stop = threading.Event()
        execs = None
        if cp.victim == "keeper":
            execs = threading.Thread(target=self._serve_execs,
                                     args=(p, name, cp.backend, stop),
                                     daemon=True)
            execs.start()
        try:
            self._kill(cp, p, res, t0, out)
        finally:
            stop.set()
            if res.kill.at is None and p.poll() is None:
                p.kill()      # a step failed before the kill: stop anyway
            try:
                p.wait(SETTLE_S)
            except subprocess.TimeoutExpired:
                res.error = res.error or \
                    f"{cp.victim}: still running {SETTLE_S:.0f} s after " \
                    "the kill"
                p.kill()
                p.wait()
            out.thread.join(10)
            if execs is not None:
                execs.join(60)
        if res.kill.at is None and not res.error and p.returncode == 0:
            # `up` finished before its kill time: the lab is up, and goes
            # down as in a clean cycle.
            t = time.monotonic()
            r = self.dcblab(["down", "--name", name], cp.backend)
            res.down_s = time.monotonic() - t
            if r.returncode != 0:
                res.error = f"`dcblab down` exited {r.returncode}: " \
                            f"{_last_line(r.stderr)}"
        elif res.kill.at is not None:
            self._settle(res, t0)
        r = self.dcblab(["reap"], cp.backend)
        m = re.search(r"(\d+) run\(s\) reaped", r.stdout)
        res.reaped = int(m.group(1)) if m else None
        if r.returncode != 0 and not res.error:
            res.error = f"`dcblab reap` exited {r.returncode}: " \
                        f"{_last_line(r.stderr)}"
        return res

    def _kill(self, cp, p, res, t0, out):
        """SIGKILL the victim at its time. `up` or pytest may exit before
        it (missed: the lab went on); `up` exiting 0 is how a keeper
        victim's lab gets ready; a pytest session's lab is ready when its
        state says "up"."""
        k = res.kill

        def ended():
            rc = p.poll()
            return rc is not None and (cp.victim != "keeper" or rc != 0)

        def ready():
            if k.ready is None and (
                    p.poll() == 0 if cp.victim != "pytest" else
                    self._status(res.lab) == "up"):
                k.ready = time.monotonic() - t0
            return k.ready is not None
        if cp.phase == "up":
            limit = t0 + _CMD_TIMEOUT_S
            while not ready() and not ended():
                if time.monotonic() > limit:
                    res.error = f"lab {res.lab}: not ready within " \
                                f"{_CMD_TIMEOUT_S} s"
                    return
                time.sleep(0.02)
            deadline = t0 + (k.ready or 0.0) + cp.kill_at
        else:
            deadline = t0 + cp.kill_at
        while time.monotonic() < deadline and not ended():
            ready()
            time.sleep(0.01)
        if ended():
            what = {"up": "`up`", "keeper": "`up`",
                    "pytest": "the pytest session"}[cp.victim]
            t_end = out.lines[-1][0] if out.lines else 0.0
            k.missed = f"{what} exited (rc {p.returncode}) {t_end:.2f} s " \
                       "in, before its kill time"
            if p.returncode != 0 or cp.victim != "up":
                res.error = f"{k.missed}: {_last_line(out.text())}"
            return
        pid = p.pid
        if cp.victim == "keeper":
            pid = None
            limit = time.monotonic() + 30
            while pid is None and time.monotonic() < limit and not ended():
                pid = self._keeper_pid(res.lab)
                if pid is None:
                    time.sleep(0.01)
            if pid is None:
                res.error = f"lab {res.lab}: no keeper to kill (`up` rc " \
                            f"{p.poll()}): {_last_line(out.text())}"
                return
        k.lab_status = self._status(res.lab)
        os.kill(pid, signal.SIGKILL)
        k.at = time.monotonic() - t0
        k.pid = pid
        k.last_line = out.last_before(k.at)

    def _settle(self, res, t0):
        """Until nobody holds the lab's run directory (its owners removed
        it, or died): the lab is dead, and `dcblab reap` may act."""
        d = self._lab_dir(res.lab)
        limit = time.monotonic() + SETTLE_S
        while d.exists() and owned(d):
            if time.monotonic() > limit:
                res.error = f"lab {res.lab}: still held {SETTLE_S:.0f} s " \
                            "after the kill (its keeper or guard did not " \
                            "stop)"
                return
            time.sleep(0.05)
        res.kill.settle_s = time.monotonic() - t0 - res.kill.at

    def census(self):
        c = self.watch.census(self.names, self.run_ids)
        limit = time.monotonic() + CENSUS_GRACE_S
        while not c.clean() and time.monotonic() < limit:
            time.sleep(0.2)
            c = self.watch.census(self.names, self.run_ids)
        return c

    def cycle(self, cp):
        """One cycle and its census: a CycleResult."""
        t0 = time.monotonic()
        res = self.clean(cp) if cp.kind == "clean" else self.killed(cp)
        res.census = self.census()
        res.seconds = time.monotonic() - t0
        return res

    # --- the run -------------------------------------------------------------

    def report(self, res):
        """The one-line report of a cycle that leaked or failed."""
        cp = res.plan
        what = f"cycle {cp.n} of {len(self.cycles)} ({cp.kind}, " \
               f"{cp.backend} backend, lab {res.lab}) of seed {self.seed}"
        kill = f"; {res.kill.describe()}" if res.kill else ""
        if res.error:
            head = f"{what} failed: {res.error}"
        else:
            head = f"{what} leaked: {res.census.summary()}"
        kinds = [c.kind for c in self.cycles]
        counts = (kinds.count("clean"), kinds.count("killed"))
        if counts != (DEFAULT_CLEAN, DEFAULT_KILLED):
            replay = f"--seed {self.seed} --clean {counts[0]} --killed " \
                     f"{counts[1]}"
        else:
            replay = f"--seed {self.seed}"
        return f"{head}{kill}; replay: dcblab soak {replay}"

    def cleanup(self):
        """Remove what a failed or leaking cycle left: this soak's
        processes (keepers stop their labs on SIGTERM), then `dcblab
        reap` for the rest. Not what the driver had before the soak (a
        pytest session's own lab, its keeper and QEMUs)."""
        had = self.watch.had if self.watch else set()
        pids = [p for p in descendants(os.getpid()) if p != self.sb.pid
                and (p, proc.start_time(p)) not in had]
        if pids:
            proc.kill(pids)
        self.sb.reap_orphans()
        self.dcblab(["reap"], BACKENDS[0])

    def run(self):
        t_start = time.monotonic()
        ours = descendants(os.getpid())
        others = [p for p in proc.pids_with_tag("qemu-system")
                  if p not in ours]
        self.watch = Watch(self.sb)
        result = SoakResult(self.seed, self.cycles, self.budget_s,
                            fds_start=self.watch.fds,
                            file_handles_start=self.watch.file_handles,
                            load_start=os.getloadavg(),
                            other_qemus=len(others))
        longest = dict(_FIRST_GUESS_S)
        seen = set()
        try:
            for cp in self.cycles:
                elapsed = time.monotonic() - t_start
                if elapsed + longest[cp.kind] > self.budget_s:
                    result.stopped = "budget"
                    break
                res = self.cycle(cp)
                result.cycles.append(res)
                longest[cp.kind] = res.seconds if cp.kind not in seen else \
                    max(longest[cp.kind], res.seconds)
                seen.add(cp.kind)
                self.on_cycle(res)
                if res.error or res.leaked:
                    result.stopped = "failure" if res.error else "leak"
                    result.report = self.report(res)
                    break
        except BaseException:
            self.cleanup()
            raise
        finally:
            if result.stopped in ("failure", "leak"):
                self.cleanup()
            result.seconds = time.monotonic() - t_start
            result.fds_end = self.watch.fds + \
                (result.cycles[-1].census.fds if result.cycles else 0)
            result.file_handles_end = self.watch.file_handles + \
                (result.cycles[-1].census.file_handles if result.cycles
                 else 0)
            result.load_end = os.getloadavg()
        return result


def soak(seed=None, clean=DEFAULT_CLEAN, killed=DEFAULT_KILLED,
         budget_s=DEFAULT_BUDGET_S, on_start=None, on_cycle=None):
    """Run a soak in a fresh Sandbox; returns its SoakResult. SEED None
    draws one; on_start(seed, cycles) is called before the first cycle."""
    if os.geteuid() != 0:
        raise SoakError("soak: labs need root (network namespaces, "
                        "mounts): run it as root")
    if seed is None:
        seed = random.SystemRandom().randrange(10 ** 6)
    cycles = plan(seed, clean, killed)
    if on_start is not None:
        on_start(seed, cycles)
    with Sandbox() as sb:
        return Soak(sb, cycles, seed, budget_s, on_cycle).run()
