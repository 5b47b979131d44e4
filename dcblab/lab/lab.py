"""A lab as its clients see it: the keeper's (see keeper.py) client side.

``Lab(topology).up()`` makes the run directory, copies the topology file
into it (everything after ``up`` reads that copy, so moving or editing
the original cannot make a lab impossible to stop), starts the lab's
keeper and follows its progress until the guests are ready.
``Lab.attach(name)`` is the same lab from another process. Either way
``lab.machines`` holds one ``LabMachine`` per host, whose agent commands
go through the keeper: any number of processes can use a guest at once.

``state.json`` (written by the keeper only) records the run id, the
backend, the kernel flavour, the keeper's and the owner's pid and start
time, and each host's QEMU pid, run directory, state and log.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .. import backends
from ..core import paths
from ..core.errors import DcblabError
from ..core.flavours import flavour
from . import snapshots, splitwire, wire
from .client import Connection, LabMachine
from .hostkernel import check_wire_modules
from .memory import check_memory
from .reaper import teardown
from .runs import (TOPOLOGY, LabError, check_name, lab_dir,
                   load_lab_topology, make_lab_dir, read_state)

__all__ = ["Lab"]

class Lab:
    """One running (or starting) lab."""

    def __init__(self, topology, name=None, backend=None, flavour_name=None):
        self.topology = topology
        self.name = check_name(topology.name if name is None else name)
        self.dir = lab_dir(self.name)
        self.backend = backends.get(backend)
        self.flavour = flavour(flavour_name)
        self.run_id = None
        self.wire = None
        self.machines = {}
        self.timings = {}
        self._guard = None

    @property
    def state(self):
        """state.json as its keeper recorded it last."""
        return read_state(self.name)

    @classmethod
    def attach(cls, name):
        """The lab NAME as its keeper recorded it."""
        state = read_state(name)
        lab = cls(load_lab_topology(name, state["topology"]), name,
                  state.get("backend"), state.get("flavour"))
        lab._attach(state)
        return lab

    def _attach(self, state):
        self.run_id = state["run_id"]
        if state.get("split"):
            self.wire = splitwire.SplitWire(self.topology, self.name,
                                            self.run_id, state.get("mac_seed"),
                                            state.get("ssh_config"))
        else:
            self.wire = wire.Wire(self.topology, self.name, self.run_id,
                                  state.get("mac_seed"))
        self.machines = {h: LabMachine(self.name, h, e)
                         for h, e in state["hosts"].items()}

    # --- up / down ---------------------------------------------------------

    def up(self, owner_pid=None, accel=None, progress=None, cold=False):
        """Start the lab's keeper and wait until every guest is ready;
        returns per-host timings (seconds). With an owner, the keeper
        stops the lab when the owner dies. The guests come from the
        topology's snapshot when one fits (snapshots.py), and a cold
        boot saves one, unless cold (or DCBLAB_SNAPSHOTS=off)."""
        cold = cold or not snapshots.enabled()
        say = progress or (lambda msg: None)
        paths.check_images(self.flavour.name)
        check_memory(self.topology, self.flavour)
        check_wire_modules()
        lock = make_lab_dir(self.name)
        t0 = time.monotonic()
        try:
            # Here, not in the keeper: a bad DCBLAB_ACCEL is a usage error.
            accel = accel or self.backend.accel(
                paths.boot_kernel(self.flavour.name), paths.initramfs())
            source = Path(self.topology.path)
            (self.dir / TOPOLOGY).write_bytes(source.read_bytes())
            self._guard = self._start_keeper(owner_pid, accel, source, lock,
                                             cold)
        except BaseException:
            teardown(None, None, self.dir)
            raise
        finally:
            # The keeper and its guard hold the lock from here on.
            os.close(lock)
        ready = self._follow(say)
        self.timings = ready["timings"]
        self.timings["total"] = time.monotonic() - t0
        self._attach(self.state)
        return self.timings

    def _start_keeper(self, owner_pid, accel, source, lock, cold):
        argv = [sys.executable, "-m", "dcblab.lab.keeper", self.name,
                "--backend", self.backend.name, "--flavour", self.flavour.name,
                "--source", str(source.resolve())]
        if owner_pid:
            argv += ["--owner", str(owner_pid)]
        if accel:
            argv += ["--accel", accel]
        if cold:
            argv.append("--cold")
        env = dict(os.environ, PYTHONPATH=str(paths.ROOT))
        with open(self.dir / "keeper.log", "ab") as log:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=log,
                                    start_new_session=True, env=env,
                                    cwd=paths.ROOT, pass_fds=(lock,))

    def _follow(self, say):
        """The keeper's progress lines until ready; Ctrl-C stops the lab
        (a second one leaves the rest of the cleanup to the keeper)."""
        guard = self._guard
        try:
            for line in guard.stdout:
                msg = json.loads(line)
                if "progress" in msg:
                    say(msg["progress"])
                elif "ready" in msg:
                    guard.stdout.close()
                    return msg["ready"]
                elif "error" in msg:
                    guard.wait()
                    raise LabError(msg["error"])
            guard.wait()
            raise LabError(f"lab {self.name}: its keeper exited (rc "
                           f"{guard.returncode}) before the lab was ready: "
                           f"see {self.dir / 'keeper.log'}")
        except KeyboardInterrupt:
            print(f"dcblab: interrupted: stopping lab {self.name} (Ctrl-C "
                  f"again leaves the cleanup to its keeper, pid "
                  f"{guard.pid})", file=sys.stderr, flush=True)
            try:
                os.killpg(guard.pid, signal.SIGTERM)
                guard.wait()
            except KeyboardInterrupt:
                print(f"dcblab: the keeper of lab {self.name} goes on "
                      "removing it; `dcblab status` shows when it is gone",
                      file=sys.stderr, flush=True)
            except ProcessLookupError:
                pass
            raise
        finally:
            if guard.returncode is not None and self.dir.exists() and \
                    not (self.dir / "state.json").exists():
                teardown(None, None, self.dir)

    def down(self, timeout=60.0):
        """Ask the keeper to stop the lab and wait until it has; if the
        keeper is gone, remove what is left by run id. Idempotent."""
        try:
            state = read_state(self.name)
        except LabError:
            state = None
        if state is not None:
            conn = Connection(self.name)
            try:
                conn.request({"op": "down"}, timeout=timeout)
                conn.next_line(timeout)
            except DcblabError:
                teardown(state["run_id"], state.get("netns"), self.dir)
            finally:
                conn.close()
        if self._guard is not None:
            try:
                self._guard.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        if state is not None and self.dir.exists():
            teardown(state["run_id"], state.get("netns"), self.dir)

    def request(self, req, timeout=None):
        conn = Connection(self.name)
        try:
            return conn.request(req, timeout=timeout)
        finally:
            conn.close()

    def calls(self):
        """{host: agent commands the keeper has served for it so far}."""
        return self.request({"op": "status"}, timeout=30)["calls"]

    def disown(self):
        """Leave the lab up after its owner exits (until `dcblab down`)."""
        self.request({"op": "disown"}, timeout=10)
        self._guard = None

    def restart(self, host):
        """Stop and start one host; its baseline is applied again."""
        self.topology.host(host)
        t = self.request({"op": "restart", "host": host},
                         timeout=180)["timings"]
        self._attach(self.state)
        return t

    def machine(self, name):
        """The guest of host NAME; one-line errors for unknown or stopped."""
        self.topology.host(name)  # names the known hosts if unknown
        try:
            return self.machines[name]
        except KeyError:
            raise LabError(f"lab {self.name!r}: host {name!r} is not running")\
                from None
