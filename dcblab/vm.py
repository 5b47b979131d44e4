"""One QEMU guest: start, wait for init and agent, stop on every path.

QEMU runs in its own process group (so a stop reaches everything it
started) with all its sockets and logs in a private run directory:

  console.log  the serial console, as QEMU's chardev logfile
  console.sock the serial console itself, for ``dcblab console``
  qga.sock     qemu-guest-agent's virtio-serial port
  qmp.sock     QMP, for quit and query-status
  qemu.log     QEMU's own stdout/stderr
"""

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import qmp
from .agent import Agent, AgentError
from .console import Console

__all__ = ["Vm", "VmSpec", "VmError", "Nic"]

QEMU = "qemu-system-x86_64"


class VmError(Exception):
    pass


@dataclass(frozen=True)
class Nic:
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
    netns: str = ""            # run QEMU inside this network namespace
    cmdline: tuple = field(default=())   # extra kernel command line words


class Vm:
    def __init__(self, spec: VmSpec, rundir):
        self.spec = spec
        self.name = spec.name
        self.rundir = Path(rundir)
        self.rundir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.rundir, 0o700)
        self.console = Console(self.rundir / "console.log", spec.name)
        self.agent = Agent(self.rundir / "qga.sock", spec.name)
        self.proc = None
        self.pid = None
        self.t_start = None

    # --- argv ----------------------------------------------------------------

    def argv(self):
        s, d = self.spec, self.rundir
        # dummy.numdummies=0: no stray dummy0; tests make the ones they need.
        cmdline = ["console=ttyS0", "loglevel=6", "panic=-1",
                   "dummy.numdummies=0",
                   f"dcblab.host={s.name}", *s.cmdline]
        accel = "kvm" if s.accel == "kvm" else "tcg,thread=multi"
        argv = [QEMU, "-name", s.name, "-nodefaults", "-no-user-config",
                "-display", "none", "-no-reboot", "-machine", "pc",
                # SeaBIOS, not qboot: qboot saves 0.35 s on a bare VM, but
                # its MP table routes no PCI INTx ("can't find IRQ for PCI
                # INT A") and two-VM ups with 8-queue NICs then took 3.8 to
                # 14.8 s instead of 2.5 to 3.0 s.
                "-accel", accel, "-smp", str(s.cpus), "-m", str(s.memory_mib),
                "-kernel", str(s.kernel), "-initrd", str(s.initrd),
                "-append", " ".join(cmdline),
                "-chardev", f"socket,id=ser0,path={d}/console.sock,server=on,"
                            f"wait=off,logfile={d}/console.log,logappend=off",
                "-serial", "chardev:ser0",
                "-chardev", f"socket,id=qga0,path={d}/qga.sock,server=on,"
                            "wait=off",
                "-device", "virtio-serial-pci,id=vser0",
                "-device", "virtserialport,bus=vser0.0,chardev=qga0,"
                           "name=org.qemu.guest_agent.0",
                "-qmp", f"unix:{d}/qmp.sock,server=on,wait=off",
                "-device", "virtio-rng-pci"]
        for i, nic in enumerate(s.nics):
            q = nic.queues
            argv += ["-netdev", f"tap,id=n{i},ifname={nic.tap},script=no,"
                                f"downscript=no,vhost=off,queues={q}",
                     "-device", f"virtio-net-pci,netdev=n{i},mac={nic.mac},"
                                f"mq={'on' if q > 1 else 'off'},"
                                f"vectors={2 * q + 2},romfile="]
        if s.netns:
            argv = ["ip", "netns", "exec", s.netns, *argv]
        return argv

    # --- lifecycle -------------------------------------------------------------

    def start(self):
        for f in ("console.log", "qga.sock", "qmp.sock", "console.sock"):
            (self.rundir / f).unlink(missing_ok=True)
        self.t_start = time.monotonic()
        log = open(self.rundir / "qemu.log", "wb")
        try:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True,
                                         umask=0o077)  # sockets 0600
        except FileNotFoundError:
            raise VmError(f"{self.name}: {QEMU} not found: run `make deps` "
                          "(Debian package qemu-system-x86)") from None
        finally:
            log.close()
        self.pid = self.proc.pid
        return self

    @classmethod
    def attach(cls, spec, rundir, pid):
        """A VM started by another process (a `dcblab up` that returned)."""
        vm = cls(spec, rundir)
        vm.pid = pid
        return vm

    def alive(self):
        if self.proc is not None:
            return self.proc.poll() is None
        if self.pid is None:
            return False
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def qemu_log(self):
        try:
            return (self.rundir / "qemu.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _died(self, what):
        rc = self.proc.returncode if self.proc else "?"
        return VmError(f"{self.name}: QEMU exited (rc {rc}) "
                       f"while waiting for {what}\nqemu.log:\n"
                       f"{self.qemu_log()[-2000:]}\nconsole tail:\n"
                       f"{self.console.tail(20)}")

    def wait_init(self, timeout=30.0):
        """Wait for init's first line; returns (host s since start, guest s)."""
        try:
            m = self.console.wait_for(
                r"\[\s*(\d+\.\d+)\] dcblab-init: started", timeout, self.alive)
        except TimeoutError as e:
            if not self.alive():
                raise self._died("init") from None
            raise VmError(str(e)) from None
        return time.monotonic() - self.t_start, float(m.group(1))

    def wait_ready(self, timeout=60.0):
        """Wait for the guest agent; returns host seconds since start."""
        try:
            self.agent.wait_ready(timeout, self.alive)
        except AgentError as e:
            if not self.alive():
                raise self._died("the guest agent") from None
            raise VmError(f"{e}\nconsole tail:\n{self.console.tail(20)}") \
                from None
        return time.monotonic() - self.t_start

    def run(self, argv, **kw):
        return self.agent.run(argv, **kw)

    def wait_exit(self, timeout):
        if self.proc is not None:
            try:
                self.proc.wait(timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def stop(self, grace=3.0):
        """Stop QEMU: guest power-off, then QMP quit, then SIGTERM, SIGKILL."""
        if self.pid is None:
            return
        if self.alive():
            try:
                self.agent.shutdown()
            except AgentError:
                pass
            if not self.wait_exit(grace):
                try:
                    with qmp.Qmp(self.rundir / "qmp.sock", timeout=1.0) as q:
                        q.execute("quit")
                except (qmp.QmpError, OSError):
                    pass
                self.wait_exit(1.0)
        self._signal_group(signal.SIGTERM)
        if not self.wait_exit(grace):
            self._signal_group(signal.SIGKILL)
            self.wait_exit(10.0)
        self.agent.close()

    def _signal_group(self, sig):
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
