"""What a backend is: how one guest of a lab runs.

A backend turns a ``VmSpec`` (kernel, initrd, memory, vCPUs, NICs on taps
that already exist in the lab's netns) into a ``Machine``: a guest that can
be started, waited for, talked to (agent, console) and stopped. The lab
only ever sees this interface, so a new backend (libvirt) or a new kind of
host (a switch VM) is a new class registered here, not an edit to ``Lab``.
"""

import os
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import DcblabError, UsageError
from ..guest.agent import AgentError
from ..guest.console import BootFailed, ConsoleTimeout

__all__ = ["TapNic", "VmSpec", "VmError", "Machine", "Backend", "register",
           "get", "names", "default_name", "DEFAULT"]


class VmError(DcblabError):
    """A guest did not start, died, or did not answer in time."""


@dataclass(frozen=True)
class TapNic:
    """A virtio-net NIC on a multi-queue tap (the tap already exists)."""
    name: str        # guest-side name, for ordering: eth0, eth1, ...
    tap: str         # host tap device, in the lab's netns
    mac: str
    queues: int = 1


@dataclass(frozen=True)
class VmSpec:
    name: str
    kernel: Path
    initrd: Path
    memory_mib: int = 128
    cpus: int = 2
    accel: str = "tcg"
    nics: tuple = ()
    netns: str = ""            # run the guest inside this network namespace
    cmdline: tuple = field(default=())   # extra kernel command line words


class Machine(ABC):
    """One guest. ``console`` and ``agent`` are its dcblab.guest clients;
    ``rundir`` holds its sockets and logs; ``pid`` is the process that
    owns it on the host (recorded in the lab's state)."""

    spec: VmSpec
    name: str
    rundir: Path
    pid: int
    t_start: float
    # On another machine (libvirt_remote.py): its pid is that machine's.
    remote = False

    @abstractmethod
    def start(self):
        """Start the guest without waiting for it; returns self."""

    def wait_init(self, timeout=30.0):
        """Block until init's first line: (host s since start, guest s).
        Like wait_ready, it ends at once, naming the console line, when
        the console says the boot failed (console.BOOT_FAILURES)."""
        try:
            m = self.console.wait_for(
                r"\[\s*(\d+\.\d+)\] dcblab-init: started", timeout,
                self.alive)
        except BootFailed as e:
            raise self._boot_failed(e.line) from None
        except ConsoleTimeout as e:
            if not self.alive():
                raise self._died("init") from None
            raise VmError(str(e)) from None
        return time.monotonic() - self.t_start, float(m.group(1))

    def wait_ready(self, timeout=60.0):
        """Block until the guest agent answers: host s since start."""
        try:
            self.agent.wait_ready(timeout, self._booting)
        except BootFailed as e:
            raise self._boot_failed(e.line) from None
        except AgentError as e:
            if not self.alive():
                raise self._died("the guest agent") from None
            raise VmError(f"{e}\nconsole tail:\n{self.console.tail(20)}") \
                from None
        return time.monotonic() - self.t_start

    @property
    def returncode(self):
        """The QEMU's exit status if this process reaped it, else None
        (still running, or reaped by another: libvirt's QEMUs)."""
        return None

    def exit_status(self):
        """" (rc N)" when the backend knows how its QEMU ended, else ""."""
        return ""

    def _booting(self):
        """alive() for the waits of a boot: BootFailed as soon as the
        console says the boot failed (the guest may run on, but will never
        be ready)."""
        line = self.console.boot_failure()
        if line:
            raise BootFailed(line, line)
        return self.alive()

    def _boot_failed(self, line):
        """One line: the host, the console line that says why."""
        ended = "" if self.alive() else f"; QEMU exited{self.exit_status()}"
        return VmError(f"{self.name}: boot failed: {line}{ended}")

    def _died(self, what):
        line = self.console.boot_failure()
        if line:
            return self._boot_failed(line)
        try:
            log = Path(self.log_path()).read_text(errors="replace")
        except OSError:
            log = ""
        return VmError(f"{self.name}: QEMU exited{self.exit_status()} "
                       f"while waiting for {what}\n"
                       f"{Path(self.log_path()).name}:\n{log[-2000:]}\n"
                       f"console tail:\n{self.console.tail(20)}")

    @abstractmethod
    def alive(self):
        """True while the guest's process runs."""

    @abstractmethod
    def stop(self, grace=3.0):
        """Stop the guest on every path; idempotent."""

    @abstractmethod
    def log_path(self):
        """The host-side log of the guest's emulator (for error reports)."""

    def run(self, argv, **kw):
        """A command in the guest (dcblab.guest.Agent.run)."""
        return self.agent.run(argv, **kw)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def set_link(self, nic, up):
        """The link of NIC (its TapNic name) up or down, as a cable
        plugged or pulled: the guest's driver sees its carrier come or go,
        and no frame passes either way while it is down."""
        raise VmError(f"{self.name}: the {type(self).__name__} machine "
                      "cannot set a link's state")

    # --- snapshots (backends whose ``snapshots`` is True) -----------------

    def pause(self):
        """Stop the guest's vCPUs (its clocks stop with them)."""
        raise VmError(f"{self.name}: the {type(self).__name__} machine "
                      "cannot pause")

    def resume(self):
        """Run the vCPUs again after pause(), save() or a restore."""
        raise VmError(f"{self.name}: the {type(self).__name__} machine "
                      "cannot resume")

    def save(self, path, timeout=120.0):
        """Write the paused guest's whole state to the file path."""
        raise VmError(f"{self.name}: the {type(self).__name__} machine "
                      "cannot save its state")

    def wait_restored(self, timeout=60.0):
        """After start(restore=...): block until the saved state is
        loaded (the guest paused, as it was saved); host s since start."""
        raise VmError(f"{self.name}: the {type(self).__name__} machine "
                      "cannot restore a state")

    def _nic_index(self, nic):
        for i, n in enumerate(self.spec.nics):
            if n.name == nic:
                return i
        raise VmError(f"{self.name}: no NIC {nic!r} (its NICs: "
                      f"{', '.join(n.name for n in self.spec.nics)})")


class Backend(ABC):
    """Makes Machines; one instance per lab."""

    name = ""
    # Whether its machines save and restore (Machine.pause ... and
    # start(restore=FILE)): labs from snapshots (lab/snapshots.py).
    snapshots = False

    def identity(self, spec: VmSpec):
        """What makes a saved state of spec's guest fit another: a list of
        strings (QEMU's argv; libvirt's version and the domain XML), with
        spec's run-specific parts (netns, run directory, MACs, run tag)
        already replaced by placeholders."""
        raise VmError(f"the {self.name} backend has no snapshots")

    @abstractmethod
    def machine(self, spec: VmSpec, rundir) -> Machine:
        """A new guest, not started yet."""

    @abstractmethod
    def accel(self, kernel, initrd) -> str:
        """The accelerator its guests use ("tcg" or "kvm")."""

    def open(self, labdir, netns, tag):
        """Before the first guest: start what the lab's guests share (the
        libvirt backend's daemon), inside ``netns``, carrying ``tag`` (the
        run id word) so the reaper finds it. Returns seconds taken."""
        return 0.0

    def close(self):
        """After the last guest stopped: stop what open() started;
        idempotent, on every path."""

    def info(self):
        """What a user needs to reach the lab through this backend (for
        state.json, `dcblab status` and `dcblab up`)."""
        return {}


_REGISTRY = {}


def register(cls):
    """Class decorator: make a Backend available by its ``name``."""
    _REGISTRY[cls.name] = cls
    return cls


def names():
    return sorted(_REGISTRY)


DEFAULT = "qemu"


def default_name():
    """DCBLAB_BACKEND if set, else "qemu"; checked like --backend."""
    name = os.environ.get("DCBLAB_BACKEND") or DEFAULT
    if name not in _REGISTRY:
        raise UsageError(f"DCBLAB_BACKEND={name!r}: unknown backend (known: "
                         f"{', '.join(names())})")
    return name


def get(name) -> Backend:
    """A new Backend instance by name (None: DCBLAB_BACKEND, else the
    default); a one-line error for unknown names."""
    if name is None:
        name = default_name()
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise UsageError(f"unknown backend {name!r} (known: "
                         f"{', '.join(names())})") from None
