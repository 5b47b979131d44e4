"""The libvirt backend: the lab's guests as libvirt domains.

Each lab gets its own libvirtd, started by the keeper inside the lab's
network namespace and in a private mount namespace, so that libvirt opens
the lab's taps and runs its QEMUs there and no domain XML can reach the
host's network. Everything the daemon writes lives under the lab's run
directory, bind-mounted over the paths a privileged libvirtd uses:

  libvirt/etc  -> /etc/libvirt       libvirtd.conf, qemu.conf (below)
  libvirt/run  -> /run/libvirt       its sockets (0700, auth none), pid files
  libvirt/lib  -> /var/lib/libvirt   domain state, the agent's socket
  libvirt/log  -> /var/log/libvirt   libvirtd.log, qemu/HOST.log
  BUILD/libvirt-cache -> /var/cache/libvirt   QEMU capabilities, shared
                                     by all labs (a fresh probe costs ~3 s)
  libvirt/passwd, group -> /etc/passwd, /etc/group: the host's, plus the
                                     libvirt-qemu user Debian's QEMU driver
                                     looks up at start (never used:
                                     qemu.conf runs QEMU as root)

/run and /var are replaced in that namespace by a tmpfs holding only those
mounts (and the lab's own run directory), so nothing is created outside
the run directory, not even a mount point. The daemon carries the run id
on its command line (its pid file's name), as do its QEMUs (the kernel
command line), so the reaper finds both. A host reaches the daemon at
``qemu:///system?socket=RUNDIR/libvirt/run/libvirt-sock``: ``virsh list``,
``virsh dumpxml h1``, ``virsh console h1`` work on a running lab.

A host's domain is transient (``createXML``), built from the same VmSpec as
the qemu backend's argv: direct kernel boot with the same command line,
``<interface type='ethernet'>`` on the lab's existing multi-queue tap
(``managed='no'``), the serial on a pty (``virsh console``, which
``dcblab console`` runs; libvirt 9.0 opens no other kind) with its log in
HOST/console.log for the console watcher, the hvc shell on HOST/shell.sock
(``dcblab shell`` as on the qemu backend), and qemu-guest-agent on
libvirt's own channel: guest commands go through
``virDomainQemuAgentCommand``.

Snapshots (lab/snapshots.py) are libvirt's save and restore: a lab saves
each paused guest with virDomainSaveFlags (libvirt's header, the domain
XML, QEMU's migration stream) and, since libvirt stops a domain it
saved, restores it at once from that file, paused, to carry on. A later
lab restores with virDomainRestoreFlags and the saved XML with this
run's parts put in (LibvirtVm.restore_xml): libvirt checks that the rest
(UUID, devices, MACs) is the saved guest's.
"""

import functools
import json
import math
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from ..core import paths, proc
from ..core.ns import in_netns
from ..guest.agent import AgentError, AgentTimeout, Commands
from ..guest.console import Console
from .base import Backend, Machine, VmError, register
from .qemu import QEMU, choose_accel, kernel_cmdline

__all__ = ["LibvirtBackend", "LibvirtVm", "Daemon", "domain_xml",
           "LIBVIRTD", "DEBIAN_QEMU_USER", "LIBVIRTD_CONF", "QEMU_CONF",
           "NS_SCRIPT", "libvirt_modules", "error_line"]

LIBVIRTD = "/usr/sbin/libvirtd"
INSTALL = ("run `make deps` (Debian packages libvirt-daemon "
           "libvirt-daemon-driver-qemu libvirt-clients python3-libvirt)")
# Debian builds the QEMU driver with --with-qemu-user=libvirt-qemu: a
# privileged daemon looks that user and group up before it reads qemu.conf
# and gives up without them. Debian's libvirt-daemon-system adds them
# (uid/gid 64055 is Debian's static allocation for it).
DEBIAN_QEMU_USER = ("libvirt-qemu", 64055)
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"

LIBVIRTD_CONF = """\
# dcblab: a private libvirtd for one lab (dcblab/backends/libvirt.py)
listen_tls = 0
listen_tcp = 0
unix_sock_rw_perms = "0700"
unix_sock_ro_perms = "0700"
unix_sock_admin_perms = "0700"
auth_unix_rw = "none"
auth_unix_ro = "none"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
host_uuid = "{uuid}"
"""

QEMU_CONF = """\
# dcblab: QEMU as root, in the daemon's own namespaces, no cgroups, no
# relabelling, output straight to files (no virtlogd)
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
namespaces = [ ]
cgroup_controllers = [ ]
stdio_handler = "file"
security_driver = "none"
"""

# sh, run by unshare in a private mount namespace inside the lab's netns.
# $1 lab's libvirt dir, $2 the shared cache, $3 the lab's run dir, $4 the
# pid file (its name carries the run id), $5 libvirtd, $6 the build
# directory (the kernel, and the snapshots libvirtd writes and restores:
# kept visible, as the run dir is, when under /run or /var). Every mount
# is -n: without it util-linux's mount records it in /run/mount/utab, and this
# script runs while /run is still the host's (the first such mount on a
# machine creates /run/mount there). The sysfs shows the lab's netns (what
# `ip netns exec` would mount).
NS_SCRIPT = r"""
set -e
R=$1
mount -n -t sysfs dcblab-sys /sys
mount -n --bind "$R/etc" /etc/libvirt
mount -n --bind "$R/passwd" /etc/passwd
mount -n --bind "$R/group" /etc/group
mount -n -t tmpfs -o mode=0755,size=1m dcblab-run "$R/ns/run"
mkdir "$R/ns/run/libvirt" "$R/ns/run/lock"
mount -n --bind "$R/run" "$R/ns/run/libvirt"
for d in "$6" "$3"; do case $d in /run/*)
    mkdir -p "$R/ns$d"
    mount -n --bind "$d" "$R/ns$d";;
esac; done
mount -n -t tmpfs -o mode=0755,size=1m dcblab-var "$R/ns/var"
mkdir -p "$R/ns/var/lib/libvirt" "$R/ns/var/log/libvirt" \
    "$R/ns/var/cache/libvirt" "$R/ns/var/tmp"
ln -s /run "$R/ns/var/run"
ln -s /run/lock "$R/ns/var/lock"
for d in "$6" "$3"; do case $d in /var/*)
    mkdir -p "$R/ns$d"
    mount -n --bind "$d" "$R/ns$d";;
esac; done
mount -n --bind "$R/lib" "$R/ns/var/lib/libvirt"
mount -n --bind "$R/log" "$R/ns/var/log/libvirt"
mount -n --bind "$2" "$R/ns/var/cache/libvirt"
mount -n --move "$R/ns/var" /var
mount -n --move "$R/ns/run" /run
exec "$5" -f /etc/libvirt/libvirtd.conf -p "/run/libvirt/$4"
"""


@functools.cache
def libvirt_modules():
    """python3-libvirt, imported on first use (the qemu backend does not
    need it), with its default error printer silenced: errors become
    exceptions, which we turn into one-line messages."""
    try:
        import libvirt
        import libvirt_qemu
    except ImportError:
        raise VmError(f"python3-libvirt is not installed: {INSTALL}") \
            from None
    libvirt.registerErrorHandler(lambda ctx, err: None, None)
    return libvirt, libvirt_qemu


def error_line(e):
    """A libvirtError's message, one line."""
    return " ".join(str(e).split())


class Daemon:
    """One lab's private libvirtd."""

    def __init__(self, labdir, netns, tag):
        self.labdir = Path(labdir)
        self.root = self.labdir / "libvirt"
        self.netns = netns
        self.tag = tag
        self.proc = None
        self.pid = None
        self._conn = None

    @property
    def socket(self):
        return self.root / "run" / "libvirt-sock"

    @property
    def uri(self):
        return f"qemu:///system?socket={self.socket}"

    @property
    def log(self):
        return self.root / "log" / "libvirtd.log"

    def _files(self):
        r = self.root
        for d in ("etc/qemu", "run", "lib", "log", "ns/run", "ns/var"):
            (r / d).mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(r, 0o700)
        # The run id as the host UUID: libvirtd would otherwise run
        # dmidecode for one.
        rid = self.tag.rpartition("=")[2].ljust(32, "0")[:32]
        uuid = f"{rid[:8]}-{rid[8:12]}-{rid[12:16]}-{rid[16:20]}-{rid[20:]}"
        (r / "etc/libvirtd.conf").write_text(LIBVIRTD_CONF.format(uuid=uuid))
        (r / "etc/qemu.conf").write_text(QEMU_CONF)
        user, uid = DEBIAN_QEMU_USER
        for f, line in (("passwd", f"{user}:x:{uid}:{uid}:Libvirt Qemu,,,:"
                                   "/var/lib/libvirt:/usr/sbin/nologin"),
                        ("group", f"{user}:x:{uid}:")):
            text = Path("/etc", f).read_text()
            if not any(x.split(":")[0] == user for x in text.splitlines()):
                text = text.rstrip("\n") + "\n" + line + "\n"
            (r / f).write_text(text)
        cache = paths.build_dir() / "libvirt-cache"
        cache.mkdir(parents=True, exist_ok=True)
        return cache

    def start(self, timeout=60.0):
        if not os.access(LIBVIRTD, os.X_OK):
            raise VmError(f"{LIBVIRTD} not found: {INSTALL}")
        libvirt, _ = libvirt_modules()
        cache = self._files()
        argv = in_netns(self.netns, [
                "unshare", "--mount", "--propagation", "private", "--",
                "sh", "-c", NS_SCRIPT,
                "dcblab-libvirtd", str(self.root), str(cache),
                str(self.labdir), f"libvirtd.{self.tag}.pid", LIBVIRTD,
                str(paths.build_dir())])
        t0 = time.monotonic()
        with open(self.root / "log" / "libvirtd.out", "wb") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True, umask=0o077)
        self.pid = self.proc.pid
        last = None
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise VmError(f"libvirtd exited (rc {self.proc.returncode}) "
                              f"before it listened: {self._tail()}")
            if self.socket.exists():
                try:
                    self._conn = libvirt.open(self.uri)
                    return time.monotonic() - t0
                except libvirt.libvirtError as e:
                    last = error_line(e)
            time.sleep(0.05)
        self.stop()
        raise VmError(f"libvirtd did not answer on {self.socket} within "
                      f"{timeout:.0f}s ({last}): {self._tail()}")

    def _tail(self):
        text = ""
        for f in (self.root / "log" / "libvirtd.out", self.log):
            try:
                text += f.read_text(errors="replace")
            except OSError:
                pass
        lines = [x for x in text.splitlines() if x.strip()]
        return " | ".join(lines[-5:]) or "no output"

    def conn(self):
        """The keeper's connection to the daemon (opened once)."""
        if self._conn is None:
            libvirt, _ = libvirt_modules()
            try:
                self._conn = libvirt.open(self.uri)
            except libvirt.libvirtError as e:
                raise VmError(f"libvirtd at {self.socket}: {error_line(e)}") \
                    from None
        return self._conn

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def close_conn(self):
        """The keeper's connection closed (if open); idempotent."""
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - a dead daemon's connection
                pass
            self._conn = None

    def stop(self, grace=5.0):
        """SIGTERM, then SIGKILL; idempotent."""
        self.close_conn()
        if self.proc is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(grace)
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc = None  # reaped: its pid may be reused from now on


def domain_xml(spec, rundir):
    """A transient domain for one VmSpec: the qemu backend's guest, in
    libvirt's words (type kvm or qemu, as spec.accel says). ``rundir``
    holds the shell socket and the console log."""
    d = Path(rundir)
    domain_type = "kvm" if spec.accel == "kvm" else "qemu"
    cmdline = " ".join(kernel_cmdline(spec))
    nics = []
    for nic in spec.nics:
        # queues > 1: libvirt sets mq=on and vectors=2N+2 itself.
        # driver name='qemu': no vhost-net, as in the qemu backend.
        queues = f" queues='{nic.queues}'" if nic.queues > 1 else ""
        nics.append(f"""\
    <interface type='ethernet'>
      <mac address='{nic.mac}'/>
      <target dev={quoteattr(nic.tap)} managed='no'/>
      <model type='virtio'/>
      <driver name='qemu'{queues}/>
      <rom enabled='no'/>
    </interface>""")
    nic_xml = "\n".join(nics)
    # ctrl_vlan=off on every NIC, as on the qemu backend (qemu.py says
    # why: QEMU 7.2 clears a restored NIC's VLAN table). libvirt has no
    # element for it: a <qemu:override> of each NIC's device properties,
    # by the alias libvirt gives it (net0, net1, ...; libvirt >= 8.2).
    overrides = "\n".join(f"""\
    <qemu:device alias='net{i}'>
      <qemu:frontend>
        <qemu:property name='ctrl_vlan' type='bool' value='false'/>
      </qemu:frontend>
    </qemu:device>""" for i in range(len(spec.nics)))
    override_xml = f"""
  <qemu:override>
{overrides}
  </qemu:override>""" if spec.nics else ""
    return f"""\
<domain type='{domain_type}' xmlns:qemu='{QEMU_NS}'>
  <name>{escape(spec.name)}</name>
  <description>dcblab guest {escape(spec.name)}</description>
  <memory unit='MiB'>{spec.memory_mib}</memory>
  <vcpu>{spec.cpus}</vcpu>
  <!-- one socket per vCPU: the kernel has no ACPI and SeaBIOS's MP table
       lists one CPU per socket -->
  <cpu><topology sockets='{spec.cpus}' dies='1' cores='1' threads='1'/></cpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{escape(str(spec.kernel))}</kernel>
    <initrd>{escape(str(spec.initrd))}</initrd>
    <cmdline>{escape(cmdline)}</cmdline>
  </os>
  <features><acpi/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/{QEMU}</emulator>
{nic_xml}
    <serial type='pty'>
      <log file={quoteattr(str(d / 'console.log'))} append='off'/>
      <target port='0'/>
    </serial>
    <console type='unix'>
      <source mode='bind' path={quoteattr(str(d / 'shell.sock'))}/>
      <target type='virtio' port='1'/>
    </console>
    <channel type='unix'>
      <source mode='bind'/>
      <target type='virtio' name='org.qemu.guest_agent.0'/>
    </channel>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
    <rng model='virtio'>
      <backend model='random'>/dev/urandom</backend>
    </rng>
  </devices>{override_xml}
</domain>
"""


class LibvirtAgent(Commands):
    """qemu-guest-agent through libvirt (virDomainQemuAgentCommand): the
    same commands as dcblab.guest.Agent, libvirt owning the channel."""

    def __init__(self, vm):
        self.vm = vm
        self.name = vm.name

    def call(self, command, arguments=None, timeout=10.0):
        libvirt, libvirt_qemu = libvirt_modules()
        msg = {"execute": command}
        if arguments is not None:
            msg["arguments"] = arguments
        dom = self.vm.domain()
        try:
            out = libvirt_qemu.qemuAgentCommand(
                dom, json.dumps(msg), max(1, math.ceil(timeout)), 0)
        except libvirt.libvirtError as e:
            code = e.get_error_code()
            if code in (libvirt.VIR_ERR_AGENT_UNRESPONSIVE,
                        libvirt.VIR_ERR_OPERATION_TIMEOUT):
                raise AgentTimeout(f"{self.name}: no reply to {command} "
                                   f"within {timeout}s ({error_line(e)})") \
                    from None
            raise AgentError(f"{self.name}: {command}: "
                             f"{error_line(e)}") from None
        try:
            return json.loads(out).get("return")
        except ValueError:
            raise AgentError(f"{self.name}: {command}: unreadable reply "
                             f"{out[:200]!r}") from None

    def ping(self, timeout):
        """guest-ping through libvirt (which syncs the channel itself)."""
        self.call("guest-ping", timeout=timeout)


class LibvirtVm(Machine):
    def __init__(self, backend, spec, rundir):
        self.backend = backend
        self.spec = spec
        self.name = spec.name
        self.rundir = Path(rundir)
        self.rundir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.console = Console(self.rundir / "console.log", spec.name)
        self.agent = LibvirtAgent(self)
        self.pid = None
        self.t_start = None
        self._dom = None
        self._restoring = None       # start(restore=...)'s thread
        self._restore_error = None

    def xml(self):
        return domain_xml(self.spec, self.rundir)

    def domain(self):
        if self._dom is None:
            libvirt, _ = libvirt_modules()
            try:
                self._dom = self.backend.daemon.conn().lookupByName(self.name)
            except libvirt.libvirtError as e:
                raise AgentError(f"{self.name}: {error_line(e)}") from None
        return self._dom

    def start(self, restore=None):
        """Boot; or with restore (a file open for reading: a saved state
        of an identical guest, Backend.identity) restore that state,
        paused, in a thread of its own (wait_restored, resume)."""
        libvirt, _ = libvirt_modules()
        for f in ("console.log", "shell.sock"):
            (self.rundir / f).unlink(missing_ok=True)
        if restore is not None:
            return self._start_restore(restore)
        xml = self.xml()
        (self.rundir / "domain.xml").write_text(xml)
        self.t_start = time.monotonic()
        try:
            self._dom = self.backend.daemon.conn().createXML(xml, 0)
        except libvirt.libvirtError as e:
            raise VmError(f"{self.name}: libvirt could not start the domain: "
                          f"{error_line(e)} (see {self.log_path()})") from None
        self.pid = self._read_pid()
        return self

    def _read_pid(self):
        pidfile = self.backend.daemon.root / "run/qemu" / f"{self.name}.pid"
        try:
            return int(pidfile.read_text().strip())
        except (OSError, ValueError) as e:
            raise VmError(f"{self.name}: no QEMU pid in {pidfile}: {e}") \
                from None

    def alive(self):
        return proc.running(self.pid)

    def log_path(self):
        return self.backend.daemon.root / "log" / "qemu" / f"{self.name}.log"

    def stop(self, grace=3.0):
        """virDomainDestroy (SIGTERM, SIGKILL after libvirt's wait); then
        make sure the QEMU is gone even if the daemon is not. A restore
        still under way is destroyed too (its domain exists from the
        restore's start)."""
        if self.t_start is None:
            return
        libvirt, _ = libvirt_modules()
        if self._restoring is not None and self._restoring.is_alive():
            try:
                self.backend.daemon.conn().lookupByName(self.name).destroy()
            except (libvirt.libvirtError, VmError):
                pass
            self._restoring.join(30)
        if self.pid is None:
            return
        try:
            self.domain().destroy()
        except (libvirt.libvirtError, AgentError, VmError):
            pass  # already gone (or the daemon is)
        proc.kill([self.pid], grace)
        self._dom = None
        # A QEMU that died on its own: libvirt forgets the transient domain
        # when it has read the monitor's EOF; a restart's createXML of the
        # same name must not come first.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.backend.daemon.alive():
            try:
                self.backend.daemon.conn().lookupByName(self.name)
            except (libvirt.libvirtError, VmError):
                return
            time.sleep(0.05)

    # --- snapshots -------------------------------------------------------

    def pause(self):
        self._call("pause", lambda dom: dom.suspend())

    def resume(self):
        self._call("resume", lambda dom: dom.resume())

    def _call(self, what, fn):
        libvirt, _ = libvirt_modules()
        try:
            fn(self.domain())
        except (libvirt.libvirtError, AgentError) as e:
            raise VmError(f"{self.name}: libvirt could not {what} the "
                          f"domain: {error_line(e)}") from None

    def restore_xml(self, saved, append=False):
        """The domain XML a saved state is restored with: the saved one
        (its UUID, devices, addresses and MACs: libvirt refuses a restore
        whose XML changes them, "Target network card mac ... does not
        match source ...") with this run's parts put in from this lab's
        own domain_xml: the kernel command line (the run id the reaper
        looks for; the guest booted long ago), the taps, and the saving
        lab's run directory made this one's wherever it appears (the
        console log, twice: libvirt lists the serial as console too; the
        shell socket). libvirt accepts those changes. append: the console
        log carries on (the saving lab's own guests, restored at once)."""
        import xml.etree.ElementTree as ET  # only the snapshot code needs it
        ET.register_namespace("qemu", QEMU_NS)
        dom = ET.fromstring(saved)
        mine = ET.fromstring(self.xml())
        for path in ("os/kernel", "os/initrd", "os/cmdline"):
            dom.find(path).text = mine.find(path).text
        for i, m in zip(dom.findall("devices/interface"),
                        mine.findall("devices/interface")):
            i.find("target").set("dev", m.find("target").get("dev"))
            i.find("mac").set("address", m.find("mac").get("address"))
        old = Path(dom.find("devices/serial/log").get("file")).parent
        for log in dom.iter("log"):
            log.set("append", "on" if append else "off")
        # (The agent channel's socket is libvirt's to place: the saved
        # XML names none.)
        for el in dom.iter():
            for k, v in list(el.attrib.items()):
                if v.startswith(f"{old}/"):
                    el.set(k, f"{self.rundir}/{v[len(str(old)) + 1:]}")
        return ET.tostring(dom, encoding="unicode")

    def _restore(self, src, xml):
        """virDomainRestoreFlags of src with xml, paused; then the new
        domain and its QEMU's pid."""
        libvirt, _ = libvirt_modules()
        conn = self.backend.daemon.conn()
        try:
            conn.restoreFlags(src, xml, libvirt.VIR_DOMAIN_SAVE_PAUSED)
            self._dom = conn.lookupByName(self.name)
        except libvirt.libvirtError as e:
            raise VmError(f"{self.name}: libvirt could not restore the saved "
                          f"state: {error_line(e)}") from None
        self.pid = self._read_pid()

    def _start_restore(self, f):
        """start(restore=f): the saved XML read from f's image, edited
        (restore_xml); the restore itself in a thread. libvirtd opens f by
        /proc/KEEPER/fd/N, a descriptor of our own: the keeper's file
        even if a newer snapshot replaced the slot since (snapshots.py)."""
        libvirt, _ = libvirt_modules()
        fd = os.dup(f.fileno())
        src = f"/proc/{os.getpid()}/fd/{fd}"
        try:
            saved = self.backend.daemon.conn().saveImageGetXMLDesc(src, 0)
            xml = self.restore_xml(saved)
        except libvirt.libvirtError as e:
            os.close(fd)
            raise VmError(f"{self.name}: libvirt could not read the saved "
                          f"state: {error_line(e)}") from None
        except BaseException:
            os.close(fd)
            raise
        (self.rundir / "domain.xml").write_text(xml)
        self.t_start = time.monotonic()
        self._restore_error = None

        def run():
            try:
                self._restore(src, xml)
            except VmError as e:
                self._restore_error = e
            finally:
                os.close(fd)
        self._restoring = threading.Thread(target=run, daemon=True)
        self._restoring.start()
        return self

    def wait_restored(self, timeout=60.0):
        """Until virDomainRestoreFlags returned (the guest paused, as
        saved): host s since start; its error, one line, if it failed."""
        self._restoring.join(timeout)
        if self._restoring.is_alive():
            raise VmError(f"{self.name}: restoring the saved state took "
                          f"over {timeout:.0f}s")
        if self._restore_error is not None:
            raise self._restore_error
        return time.monotonic() - self.t_start

    def save(self, path, timeout=120.0):
        """virDomainSaveFlags of the paused guest into path: libvirt's
        header and the domain's XML, then QEMU's migration stream. libvirt
        stops the domain once saved: the guest is restored at once from
        that file, paused, so the saving lab carries on (a new QEMU: a
        new pid, its console log appended to). No timeout: libvirt's
        calls return when done or failed."""
        libvirt, _ = libvirt_modules()
        conn = self.backend.daemon.conn()
        try:
            self.domain().saveFlags(str(path), None,
                                    libvirt.VIR_DOMAIN_SAVE_PAUSED)
        except (libvirt.libvirtError, AgentError) as e:
            raise VmError(f"{self.name}: saving its state failed: "
                          f"{error_line(e)}") from None
        self._dom = None
        (self.rundir / "shell.sock").unlink(missing_ok=True)
        try:
            xml = self.restore_xml(conn.saveImageGetXMLDesc(str(path), 0),
                                   append=True)
        except libvirt.libvirtError as e:
            raise VmError(f"{self.name}: saved, but libvirt could not read "
                          f"the saved state back: {error_line(e)}") from None
        self._restore(str(path), xml)

    def set_link(self, nic, up):
        """The interface's <link state='up|down'/>, as `virsh
        domif-setlink` sets it: its live XML, changed only there, given
        back to virDomainUpdateDeviceFlags; libvirt tells QEMU
        (set_link), and the guest's driver sees its carrier come or go."""
        import xml.etree.ElementTree as ET  # only this method needs it
        libvirt, _ = libvirt_modules()
        mac = self.spec.nics[self._nic_index(nic)].mac
        state = "up" if up else "down"
        try:
            dom = self.domain()
            iface = next((i for i in ET.fromstring(dom.XMLDesc(0)).iter(
                "interface") if i.find(f"mac[@address='{mac}']") is not None),
                None)
            if iface is None:
                raise VmError(f"{self.name}: no interface with MAC {mac} "
                              f"({nic}) in its live domain XML")
            link = iface.find("link")
            if link is None:
                link = ET.SubElement(iface, "link")
            link.set("state", state)
            dom.updateDeviceFlags(ET.tostring(iface, encoding="unicode"),
                                  libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError as e:
            raise VmError(f"{self.name}: {nic}: libvirt could not set its "
                          f"link {state}: {error_line(e)}") from None


@register
class LibvirtBackend(Backend):
    """Guests as transient libvirt domains of a private libvirtd."""

    name = "libvirt"
    snapshots = True

    def __init__(self):
        self.daemon = None

    def identity(self, spec):
        """libvirt's version and its daemon binary, and spec's domain XML
        (with @RUNDIR@ for the run directory) but for the host's TSC
        frequency (as the qemu backend's identity). libvirt makes QEMU's
        command line from the XML: another libvirt may make another
        machine of the same XML."""
        libvirt, _ = libvirt_modules()
        st = os.stat(LIBVIRTD)
        xml = re.sub(r" tsc_early_khz=\d+", "",
                     domain_xml(spec, Path("@RUNDIR@")))
        return [f"libvirt {libvirt.getVersion()}; {LIBVIRTD} {st.st_size} "
                f"{st.st_mtime_ns}", xml]

    def open(self, labdir, netns, tag):
        self.daemon = Daemon(labdir, netns, tag)
        return self.daemon.start()

    def close(self):
        if self.daemon is not None:
            self.daemon.stop()

    def info(self):
        if self.daemon is None:
            return {}
        return {"uri": self.daemon.uri, "daemon_pid": self.daemon.pid,
                "daemon_log": str(self.daemon.log)}

    def machine(self, spec, rundir):
        if self.daemon is None:
            raise VmError("libvirt backend: open() the lab's daemon first")
        return LibvirtVm(self, spec, rundir)

    def accel(self, kernel, initrd):
        return choose_accel(kernel, initrd)

