"""The qemu backend: one QEMU process per guest, run directly.

Start, wait for init and agent, stop on every path; and the accelerator
probe (TCG unless a KVM probe boot succeeds). QEMU runs in its own
process group (so a stop reaches everything it started) with all its
sockets and logs in a private run directory:

  console.log  the serial console, as QEMU's chardev logfile
  console.sock the serial console itself, for ``dcblab console``
  qga.sock     qemu-guest-agent's virtio-serial port
  qmp.sock     QMP, for quit and query-status
  shell.sock   a virtio console (hvc) with a login shell, for ``dcblab shell``
  qemu.log     QEMU's own stdout/stderr
"""

import functools
import os
import shlex
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from ..core import paths, proc
from ..core.ns import in_netns
from ..core.errors import UsageError
from ..guest import qmp
from ..guest.agent import Agent, AgentError
from ..guest.console import BootFailed, Console, ConsoleTimeout
from .base import Backend, Machine, VmError, VmSpec, register


@functools.cache
def tsc_cmdline():
    """A TCG guest's clock: its TSC, at the host TSC's frequency (what a
    TCG guest's RDTSC reads), measured by build/tools/tsc-khz. Without
    ACPI the kernel has nothing to calibrate the TSC against, marks it
    unstable and keeps time with jiffies, which lose ticks whenever the
    vCPU thread waits for a core: guest clocks then ran up to ~1.8x slow
    with four guests on two cores, and every rate a guest set (a tbf
    shaper, priosend --rate) was off by as much. tools/tsc-khz.c says
    more. Empty if the tool is missing or the TSC unusable (jiffies as
    before). The tool measures for 0.25 s: its answer is kept per host
    boot in BUILD/tsc-khz (as the accelerator probe's), a quarter of a
    restored lab's up otherwise."""
    cache = paths.build_dir() / "tsc-khz"
    key = _boot_id()
    try:
        k, _, khz = cache.read_text().strip().rpartition(" ")
        if k == key and khz.isdigit():
            return (f"tsc_early_khz={khz}", "tsc=reliable")
    except OSError:
        pass
    try:
        out = subprocess.run([str(paths.tools_dir() / "tsc-khz")],
                             capture_output=True, text=True, timeout=10)
    except OSError:
        return ()
    khz = out.stdout.strip()
    if out.returncode != 0 or not khz.isdigit():
        return ()
    try:
        cache.write_text(f"{key} {khz}\n")
    except OSError:
        pass
    return (f"tsc_early_khz={khz}", "tsc=reliable")

__all__ = ["QemuVm", "QemuBackend", "choose_accel", "probe_kvm", "QEMU",
           "kernel_cmdline", "qemu_argv"]

QEMU = "qemu-system-x86_64"
PROBE_TIMEOUT = 5.0


def kernel_cmdline(spec):
    """The guest kernel's command line words, the same on every backend."""
    # dummy.numdummies=0: no stray dummy0; tests make the ones they need.
    words = ["console=ttyS0", "loglevel=6", "panic=-1", "dummy.numdummies=0",
             f"dcblab.host={spec.name}", *spec.cmdline]
    if spec.accel != "kvm":
        words += tsc_cmdline()
    return words


def qemu_argv(spec, rundir):
    """QEMU's argv for spec, its sockets and logs in rundir (without the
    netns wrapper)."""
    s, d = spec, rundir
    cmdline = kernel_cmdline(s)
    accel = "kvm" if s.accel == "kvm" else "tcg,thread=multi"
    argv = [QEMU, "-name", s.name, "-nodefaults", "-no-user-config",
            "-display", "none", "-no-reboot", "-machine", "pc",
            # SeaBIOS, not qboot: qboot saves 0.35 s on a bare VM, but
            # its MP table routes no PCI INTx ("can't find IRQ for PCI
            # INT A") and two-VM ups with 8-queue NICs then took 3.8 to
            # 14.8 s instead of 2.5 to 3.0 s.
            # One socket per vCPU: the kernel has no ACPI, and SeaBIOS's
            # MP table lists one processor per socket, so `-smp 2` (one
            # socket, two cores) boots a guest with 1 CPU.
            "-accel", accel,
            "-smp", f"{s.cpus},sockets={s.cpus},cores=1,threads=1",
            "-m", str(s.memory_mib),
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
            # A second port on the same bus: a virtio console (hvc) with
            # a login shell on it, for `dcblab shell`.
            "-chardev", f"socket,id=sh0,path={d}/shell.sock,server=on,"
                        "wait=off",
            "-device", "virtconsole,bus=vser0.0,chardev=sh0,"
                       "name=org.dcblab.shell.0",
            "-qmp", f"unix:{d}/qmp.sock,server=on,wait=off",
            "-device", "virtio-rng-pci"]
    for i, nic in enumerate(s.nics):
        q = nic.queues
        # ctrl_vlan=off: no VLAN filter in QEMU (every VID passes; the
        # guest's 8021q filters). QEMU 7.2 loads a saved NIC's VLAN table
        # and then clears it when it sets the NIC's features: a guest
        # restored from a snapshot (lab/snapshots.py) received no tagged
        # frame (query-rx-filter: vlan-table [] after the restore, [100,
        # 0] before the save).
        argv += ["-netdev", f"tap,id=n{i},ifname={nic.tap},script=no,"
                            f"downscript=no,vhost=off,queues={q}",
                 "-device", f"virtio-net-pci,netdev=n{i},mac={nic.mac},"
                            f"mq={'on' if q > 1 else 'off'},ctrl_vlan=off,"
                            f"vectors={2 * q + 2},romfile="]
    return argv


class QemuVm(Machine):
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

    def argv(self, restore_fd=None):
        """QEMU's argv; with restore_fd, loading the saved state from that
        (inherited) descriptor instead of booting."""
        argv = qemu_argv(self.spec, self.rundir)
        if restore_fd is not None:
            argv += ["-incoming", f"fd:{restore_fd}"]
        if self.spec.netns:
            argv = in_netns(self.spec.netns, argv)
        return argv

    # --- lifecycle -------------------------------------------------------------

    def start(self, restore=None):
        """Boot, or with restore (a file open for reading: a saved state
        of an identical guest, Backend.identity) load that state and wait
        paused (wait_restored, resume)."""
        for f in ("console.log", "qga.sock", "qmp.sock", "console.sock",
                  "shell.sock"):
            (self.rundir / f).unlink(missing_ok=True)
        self.t_start = time.monotonic()
        fd = restore.fileno() if restore is not None else None
        log = open(self.rundir / "qemu.log", "wb")
        try:
            self.proc = subprocess.Popen(self.argv(fd),
                                         stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True,
                                         pass_fds=() if fd is None else (fd,),
                                         umask=0o077)  # sockets 0600
        except FileNotFoundError:
            raise VmError(f"{self.name}: {QEMU} not found: run `make deps` "
                          "(Debian package qemu-system-x86)") from None
        finally:
            log.close()
        self.pid = self.proc.pid
        return self

    def alive(self):
        if self.proc is not None:
            return self.proc.poll() is None
        return proc.running(self.pid)

    def log_path(self):
        return self.rundir / "qemu.log"

    @property
    def returncode(self):
        # poll(): a QEMU that just died is reaped (and counted) here.
        return self.proc.poll() if self.proc else None

    def exit_status(self):
        rc = self.returncode
        return f" (rc {'?' if rc is None else rc})"

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

    # --- snapshots -------------------------------------------------------------

    def _qmp(self, command, arguments=None, timeout=5.0):
        with qmp.Qmp(self.rundir / "qmp.sock", timeout=timeout) as q:
            return q.execute(command, arguments)

    def pause(self):
        self._qmp("stop")

    def resume(self):
        self._qmp("cont")

    def save(self, path, timeout=120.0):
        """QEMU's migration stream of the paused guest into path (an
        exec: URI: QEMU 7.2 has no file: one), uncapped (QEMU's default
        cap is 32 MiB/s); RAM pages of zeros take a few bytes each."""
        with qmp.Qmp(self.rundir / "qmp.sock", timeout=10.0) as q:
            q.execute("migrate-set-parameters",
                      {"max-bandwidth": 1 << 40})
            q.execute("migrate", {"uri": "exec:cat > " +
                                  shlex.quote(str(path))})
            deadline = time.monotonic() + timeout
            while True:
                st = q.execute("query-migrate")
                status = st.get("status")
                if status == "completed":
                    return
                if status in ("failed", "cancelled"):
                    raise VmError(f"{self.name}: saving its state failed: "
                                  f"{st.get('error-desc', status)}")
                if time.monotonic() > deadline or not self.alive():
                    raise VmError(f"{self.name}: saving its state took over "
                                  f"{timeout:.0f}s (status {status})")
                time.sleep(0.02)

    def wait_restored(self, timeout=60.0):
        """Until the incoming state is loaded: QEMU leaves "inmigrate" for
        "paused" (the guest was saved paused); one line with QEMU's own
        message when it exits instead (a state that does not fit)."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                log = Path(self.log_path()).read_text(errors="replace")
                last = [ln for ln in log.splitlines() if ln.strip()]
                raise VmError(f"{self.name}: QEMU exited{self.exit_status()}"
                              f" loading the saved state: "
                              f"{last[-1] if last else 'no message'}")
            try:
                reply = self._qmp("query-status", timeout=2.0)
            except (qmp.QmpError, OSError):
                reply = None       # its socket is not there yet
            # A reply without a status (CI saw one, once, as the KeyError
            # of a restored up; not reproduced) counts as not loaded yet.
            status = reply.get("status") if isinstance(reply, dict) \
                else None
            if status not in (None, "inmigrate"):
                return time.monotonic() - self.t_start
            if time.monotonic() > deadline:
                raise VmError(f"{self.name}: loading the saved state took "
                              f"over {timeout:.0f}s (query-status: {reply!r})")
            time.sleep(0.02)

    def set_link(self, nic, up):
        """QMP set_link on the NIC's netdev (n0, n1, ...): QEMU marks the
        tap's end and the virtio NIC down (the guest's driver sees its
        carrier go; frames either way are dropped) or up again."""
        i = self._nic_index(nic)
        with qmp.Qmp(self.rundir / "qmp.sock", timeout=5.0) as q:
            q.execute("set_link", {"name": f"n{i}", "up": bool(up)})


@register
class QemuBackend(Backend):
    """QEMU run directly: one process group per guest, sockets in its
    run directory."""

    name = "qemu"
    snapshots = True

    def identity(self, spec):
        """QEMU's argv for spec, but for the host's TSC frequency (measured
        anew by each keeper, it varies by ~10 kHz: lab/snapshots.py
        compares it within a tolerance)."""
        return [w for w in qemu_argv(spec, Path("@RUNDIR@"))
                if "tsc_early_khz=" not in w] + \
            [" ".join(w for w in kernel_cmdline(spec)
                      if not w.startswith("tsc_early_khz="))]

    def machine(self, spec, rundir):
        return QemuVm(spec, rundir)

    def accel(self, kernel, initrd):
        return choose_accel(kernel, initrd)


# --- accelerator ------------------------------------------------------------
# On these machines /dev/kvm exists but a KVM guest hangs at boot (nested
# virtualisation), so KVM is used only after a short probe boot under KVM
# printed init's probe line. The result is cached per host boot in
# BUILD/accel-probe; DCBLAB_ACCEL=tcg|kvm skips the probe.

def _boot_id():
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def probe_kvm(kernel, initrd, timeout=PROBE_TIMEOUT):
    """True if a KVM guest reaches init's probe line within timeout."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    # In the build directory, not /tmp: an `up` killed during the probe
    # leaves nothing outside the places a lab may write.
    paths.build_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvm-probe-",
                                     dir=paths.build_dir()) as d:
        vm = QemuVm(VmSpec("kvm-probe", kernel, initrd, cpus=1, accel="kvm",
                           cmdline=("dcblab.probe",)), d)
        try:
            vm.start()
            vm.console.wait_for(r"dcblab-init: probe ok", timeout, vm.alive)
            return True
        except (ConsoleTimeout, BootFailed, VmError):
            return False
        finally:
            vm.stop(grace=1.0)


def choose_accel(kernel, initrd):
    """DCBLAB_ACCEL if it says tcg or kvm, else the cached probe's answer."""
    forced = os.environ.get("DCBLAB_ACCEL", "auto")
    if forced in ("tcg", "kvm"):
        return forced
    if forced != "auto":
        raise UsageError(f"DCBLAB_ACCEL={forced!r}: use tcg, kvm or auto")
    cache = paths.build_dir() / "accel-probe"
    # The hang is the host's, not our kernel's: one probe per host boot.
    key = _boot_id()
    if cache.exists():
        k, _, result = cache.read_text().strip().rpartition(" ")
        if k == key:
            return result
    result = "kvm" if probe_kvm(kernel, initrd) else "tcg"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(f"{key} {result}\n")
    return result
