"""A lab: a topology brought up as a wire plus one guest per host.

``state.json`` (see runs.py) records the run id, the backend, the kernel
flavour, the owner (pid and start time of the process that owns the lab)
and each guest's pid and run directory. The owner is the process that
brought the lab up while it is starting, and a pytest session for a
session lab; a lab that ``dcblab up`` finished has no owner and stays up
until ``dcblab down``.
"""

import os
import shutil
import threading
import time
import uuid

from .. import backends
from ..core import paths, proc
from ..core.errors import DcblabError
from ..core.flavours import flavour
from ..topology import load
from . import wire
from .baseline import apply_baseline
from .reap import run_pids, run_tag
from .runs import (LabError, check_name, lab_dir, read_state, run_root,
                   write_state)

__all__ = ["Lab"]


class Lab:
    """One running (or starting) lab."""

    def __init__(self, topology, name=None, backend=None, flavour_name=None):
        self.topology = topology
        self.name = check_name(name or topology.name)
        self.dir = lab_dir(self.name)
        self.backend = backends.get(backend or backends.DEFAULT)
        self.flavour = flavour(flavour_name)
        self.run_id = None
        self.wire = None
        self.machines = {}
        self.timings = {}

    @property
    def state(self):
        """state.json as recorded now (by whichever process owns the lab)."""
        return read_state(self.name)

    def _write_state(self, owner_pid, status):
        write_state(self.name, {
            "name": self.name, "run_id": self.run_id,
            "topology": self.topology.path, "status": status,
            "backend": self.backend.name, "flavour": self.flavour.name,
            "owner_pid": owner_pid,
            "owner_start": proc.start_time(owner_pid) if owner_pid else None,
            "created": time.time(),
            "hosts": {n: {"pid": m.pid, "rundir": str(m.rundir)}
                      for n, m in self.machines.items()},
            "netns": self.wire.netns if self.wire else None})

    @classmethod
    def attach(cls, name):
        """The lab NAME as recorded by the process that brought it up."""
        state = read_state(name)
        lab = cls(load(state["topology"]), name, state.get("backend"),
                  state.get("flavour"))
        lab.run_id = state["run_id"]
        lab.wire = wire.Wire(lab.topology, name, lab.run_id)
        for host in lab.topology.hosts:
            h = state["hosts"].get(host.name)
            if h:
                lab.machines[host.name] = lab.backend.attach(
                    lab._spec(host, "tcg"), h["rundir"], h["pid"])
        return lab

    # --- up / down ---------------------------------------------------------

    def _spec(self, host, accel):
        nics = tuple(backends.TapNic(n.name, wire.Wire.tap(n),
                                     self.wire.mac(n), n.queues)
                     for n in host.nics)
        return backends.VmSpec(
            host.name, paths.bzimage(self.flavour.name), paths.initramfs(),
            memory_mib=max(host.memory_mib, self.flavour.min_memory_mib),
            cpus=host.cpus, accel=accel, nics=nics, netns=self.wire.netns,
            cmdline=(run_tag(self.run_id),))

    def up(self, owner_pid=None, accel=None, progress=None):
        """Bring the lab up; returns per-host timings (seconds)."""
        say = progress or (lambda msg: None)
        paths.check_images(self.flavour.name)
        run_root().mkdir(mode=0o755, parents=True, exist_ok=True)
        try:
            self.dir.mkdir(mode=0o700)
        except FileExistsError:
            raise LabError(f"lab {self.name!r} is already up ({self.dir}): "
                           f"`dcblab down --name {self.name}`, or "
                           "`dcblab reap` if its owner died") from None
        self.run_id = uuid.uuid4().hex[:12]
        self.wire = wire.Wire(self.topology, self.name, self.run_id)
        owner = owner_pid or os.getpid()
        t0 = time.monotonic()
        try:
            self._write_state(owner, "starting")
            accel = accel or self.backend.accel(
                paths.bzimage(self.flavour.name), paths.initramfs())
            self.wire.up()
            say(f"wire: netns {self.wire.netns}, "
                f"{len(self.topology.links)} link(s) "
                f"({time.monotonic() - t0:.2f}s)")
            for host in self.topology.hosts:
                m = self.backend.machine(self._spec(host, accel),
                                         self.dir / host.name)
                self.machines[host.name] = m
                m.start()
            self._write_state(owner, "starting")
            self._all_ready()
            self._write_state(owner_pid, "up" if owner_pid is None
                              else "owned")
            self.timings["total"] = time.monotonic() - t0
            for h in self.topology.hosts:
                t = self.timings[h.name]
                say(f"{h.name}: init {t['init']:.2f}s, agent {t['agent']:.2f}s,"
                    f" baseline {t['ready']:.2f}s ({accel}, "
                    f"{self.flavour.name} kernel)")
            return self.timings
        except BaseException:
            self.down()
            raise

    def _all_ready(self):
        errors = []
        threads = [threading.Thread(target=self._ready, args=(h, errors))
                   for h in self.topology.hosts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise LabError("\n".join(errors))

    def _ready(self, host, errors):
        m = self.machines[host.name]
        try:
            t_init, _ = m.wait_init(timeout=60)
            t_agent = m.wait_ready(timeout=60)
            apply_baseline(m, host)
            self.timings[host.name] = {"init": t_init, "agent": t_agent,
                                       "ready": time.monotonic() - m.t_start}
        except DcblabError as e:
            errors.append(f"{host.name}: {e}")

    def down(self):
        """Stop the guests, remove the wire and the run directory.
        Idempotent."""
        for m in self.machines.values():
            m.stop()
        if self.run_id:
            proc.kill(run_pids(self.run_id))
        if self.wire:
            self.wire.down()
        shutil.rmtree(self.dir, ignore_errors=True)

    def machine(self, name):
        """The guest of host NAME; one-line errors for unknown or stopped."""
        self.topology.host(name)  # names the known hosts if unknown
        try:
            return self.machines[name]
        except KeyError:
            raise LabError(f"lab {self.name!r}: host {name!r} is not running")\
                from None
