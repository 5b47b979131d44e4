"""What a backend is: how one guest of a lab runs.

A backend turns a ``VmSpec`` (kernel, initrd, memory, vCPUs, NICs on taps
that already exist in the lab's netns) into a ``Machine``: a guest that can
be started, waited for, talked to (agent, console) and stopped. The lab
only ever sees this interface, so a new backend (libvirt) or a new kind of
host (a switch VM) is a new class registered here, not an edit to ``Lab``.
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import DcblabError, UsageError

__all__ = ["TapNic", "VmSpec", "VmError", "Machine", "Backend", "register",
           "get", "names"]


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

    @abstractmethod
    def start(self):
        """Start the guest without waiting for it; returns self."""

    @abstractmethod
    def wait_init(self, timeout):
        """Block until init's first line: (host s since start, guest s)."""

    @abstractmethod
    def wait_ready(self, timeout):
        """Block until the guest agent answers: host s since start."""

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


class Backend(ABC):
    """Makes Machines; one instance per lab."""

    name = ""

    @abstractmethod
    def machine(self, spec: VmSpec, rundir) -> Machine:
        """A new guest, not started yet."""

    @abstractmethod
    def attach(self, spec: VmSpec, rundir, pid) -> Machine:
        """A guest another process started (a `dcblab up` that returned)."""

    @abstractmethod
    def accel(self, kernel, initrd) -> str:
        """The accelerator its guests use ("tcg" or "kvm")."""


_REGISTRY = {}


def register(cls):
    """Class decorator: make a Backend available by its ``name``."""
    _REGISTRY[cls.name] = cls
    return cls


def names():
    return sorted(_REGISTRY)


def get(name) -> Backend:
    """A new Backend instance by name; a one-line error for unknown names."""
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise UsageError(f"unknown backend {name!r} (known: "
                         f"{', '.join(names())})") from None
