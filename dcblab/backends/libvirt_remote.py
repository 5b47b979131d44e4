"""The libvirt backend on another machine: a lab's guests there, driven
from here over ``qemu+ssh://`` (docs/scale.md).

On each machine of a split lab the lab gets what the libvirt backend
gives it on this one (libvirt.py): a private libvirtd in the lab's
network namespace and a private mount namespace, every file of it under
the lab's run directory, which has the same path on every machine. Here
ssh starts it (the same script, run over ssh, the daemon in the
foreground of that ssh session) and the keeper reaches it at
``qemu+ssh://DEST/system?socket=RUNDIR/libvirt/run/libvirt-sock``:
libvirt's own remote transport, through ``nc -U`` on the far end. The
guest agent (virDomainQemuAgentCommand), link state and domain state all
go over that connection. No dcblab process runs on the machine but those
the lab's own ssh sessions started.

What the keeper reads from files on this machine comes over ssh too: each
guest's serial console is copied as it grows (``tail -F`` over ssh) into
the same path here, so the console watcher, splat checks and reports read
it unchanged; its hvc shell socket is forwarded here (``ssh -L``), so
``dcblab shell`` works unchanged. The guest kernel and initramfs are
copied into the run directory there before the first guest starts.

No snapshots: a saved state on another machine is a later step.
"""

import shlex
import subprocess
import time
from pathlib import Path

from ..core.cmd import CmdError
from ..core.ns import in_netns
from ..guest.agent import AgentError
from ..guest.console import Console
from .base import VmError
from .libvirt import (DEBIAN_QEMU_USER, LIBVIRTD, LIBVIRTD_CONF, NS_SCRIPT,
                      QEMU_CONF, Daemon, LibvirtBackend, LibvirtVm, error_line,
                      libvirt_modules)

__all__ = ["RemoteDaemon", "RemoteVm", "RemoteLibvirtBackend",
           "wrapper_script"]


def _stop(p, grace=2.0):
    if p is None or p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(grace)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


class RemoteDaemon(Daemon):
    """One lab's private libvirtd on another machine."""

    def __init__(self, labdir, netns, tag, shell, wrapper):
        super().__init__(labdir, netns, tag)
        self.shell = shell
        self.wrapper = wrapper   # the ssh libvirt runs (the lab's options)

    @property
    def uri(self):
        return (f"qemu+ssh://{self.shell.dest}/system?socket={self.socket}"
                f"&command={self.wrapper}&proxy=netcat&no_tty=1")

    def _files(self):
        r = self.root
        sh = self.shell
        sh.run(["mkdir", "-p", "-m", "700",
                *(str(r / d) for d in ("etc/qemu", "run", "lib", "log",
                                       "ns/run", "ns/var", "cache"))])
        rid = self.tag.rpartition("=")[2].ljust(32, "0")[:32]
        uuid = f"{rid[:8]}-{rid[8:12]}-{rid[12:16]}-{rid[16:20]}-{rid[20:]}"
        sh.write(r / "etc/libvirtd.conf", LIBVIRTD_CONF.format(uuid=uuid))
        sh.write(r / "etc/qemu.conf", QEMU_CONF)
        user, uid = DEBIAN_QEMU_USER
        for f, line in (("passwd", f"{user}:x:{uid}:{uid}:Libvirt Qemu,,,:"
                                   "/var/lib/libvirt:/usr/sbin/nologin"),
                        ("group", f"{user}:x:{uid}:")):
            text = sh.read(f"/etc/{f}")
            if not any(x.split(":")[0] == user for x in text.splitlines()):
                text = text.rstrip("\n") + "\n" + line + "\n"
            sh.write(r / f, text, mode="644")
        return r / "cache"

    def start(self, timeout=60.0):
        libvirt, _ = libvirt_modules()
        cache = self._files()
        argv = self.shell.argv(in_netns(self.netns, [
            "unshare", "--mount", "--propagation", "private", "--",
            "sh", "-c", NS_SCRIPT, "dcblab-libvirtd", str(self.root),
            str(cache), str(self.labdir), f"libvirtd.{self.tag}.pid",
            LIBVIRTD, str(self.labdir)]))
        t0 = time.monotonic()
        out = open(self.labdir / "libvirt-remote.out", "wb")
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        finally:
            out.close()
        self.pid = self.proc.pid
        last = None
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise VmError(f"machine {self.shell.name}: libvirtd exited "
                              f"(rc {self.proc.returncode}) before it "
                              f"listened: {self._tail()}")
            try:
                self._conn = libvirt.open(self.uri)
                return time.monotonic() - t0
            except libvirt.libvirtError as e:
                last = error_line(e)
            time.sleep(0.2)
        self.stop()
        raise VmError(f"machine {self.shell.name}: libvirtd did not answer "
                      f"at {self.uri} within {timeout:.0f}s ({last}): "
                      f"{self._tail()}")

    def _tail(self):
        try:
            text = (self.labdir / "libvirt-remote.out").read_text(
                errors="replace")
        except OSError:
            text = ""
        lines = [x for x in text.splitlines() if x.strip()]
        return " | ".join(lines[-5:]) or "no output"

    def stop(self, grace=5.0):
        """libvirtd there stopped by its pid file, then its ssh here;
        idempotent."""
        self.close_conn()
        if self.proc is None:
            return
        pidfile = self.root / "run" / f"libvirtd.{self.tag}.pid"
        try:
            self.shell.run(["sh", "-c", 'p=$(cat "$1" 2>/dev/null) && '
                            'kill "$p" 2>/dev/null; true', "sh",
                            str(pidfile)], timeout=30)
        except CmdError:
            pass  # the machine is unreachable: reap removes the rest
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            _stop(self.proc)
        self.proc = None


class RemoteVm(LibvirtVm):
    """A guest on another machine; its console and shell socket here."""

    remote = True

    def __init__(self, backend, spec, rundir):
        super().__init__(backend, spec, rundir)
        self.shell = backend.shell
        self.shell.run(["mkdir", "-p", "-m", "700", str(self.rundir)])
        self.console = Console(self.rundir / "console.log", spec.name)
        self._copies = []

    def start(self, restore=None):
        if restore is not None:
            raise VmError(f"{self.name}: a guest on machine "
                          f"{self.shell.name} cannot be restored")
        super().start()
        console = open(self.rundir / "console.log", "wb")
        try:
            self._copies.append(subprocess.Popen(
                self.shell.argv(["tail", "-n", "+1", "-F",
                                 str(self.rundir / "console.log")]),
                stdin=subprocess.DEVNULL, stdout=console,
                stderr=subprocess.DEVNULL, start_new_session=True))
        finally:
            console.close()
        shell = self.rundir / "shell.sock"
        self._copies.append(subprocess.Popen(
            self.shell.forward(shell, shell), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True))
        return self

    def _read_pid(self):
        pidfile = self.backend.daemon.root / "run/qemu" / f"{self.name}.pid"
        try:
            return int(self.shell.read(pidfile).strip())
        except (CmdError, ValueError) as e:
            raise VmError(f"{self.name}: no QEMU pid in {pidfile} on "
                          f"machine {self.shell.name}: "
                          f"{str(e).splitlines()[0]}") from None

    def alive(self):
        if self.pid is None:
            return False
        libvirt, _ = libvirt_modules()
        try:
            return bool(self.domain().isActive())
        except (libvirt.libvirtError, AgentError, VmError):
            return False

    def stop(self, grace=3.0):
        for p in self._copies:
            _stop(p)
        self._copies = []
        if self.t_start is None or self.pid is None:
            return
        libvirt, _ = libvirt_modules()
        try:
            self.domain().destroy()
        except (libvirt.libvirtError, AgentError, VmError):
            pass
        self._dom = None
        self.pid = None


class RemoteLibvirtBackend(LibvirtBackend):
    """Guests as transient domains of a lab's libvirtd on the machine
    ``shell`` reaches (core/remote.Ssh)."""

    snapshots = False

    def __init__(self, shell, wrapper):
        super().__init__()
        self.shell = shell
        self.wrapper = wrapper

    def open(self, labdir, netns, tag):
        self.daemon = RemoteDaemon(labdir, netns, tag, self.shell,
                                   self.wrapper)
        return self.daemon.start()

    def push_images(self, labdir, kernel, initrd):
        """The guest kernel and initramfs into labdir/images there: the
        paths its guests boot from."""
        d = Path(labdir) / "images"
        self.shell.run(["mkdir", "-p", "-m", "700", str(d)])
        out = []
        for src in (Path(kernel), Path(initrd)):
            dst = d / src.name
            with open(src, "rb") as f:
                r = subprocess.run(self.shell.argv(
                    ["sh", "-c", 'cat > "$1"', "sh", str(dst)]), stdin=f,
                    capture_output=True, timeout=300)
            if r.returncode != 0:
                raise VmError(f"machine {self.shell.name}: copying {src} "
                              f"failed: {r.stderr.decode(errors='replace')}")
            out.append(dst)
        return out

    def machine(self, spec, rundir):
        if self.daemon is None:
            raise VmError("libvirt backend: open() the lab's daemon first")
        return RemoteVm(self, spec, rundir)

    def info(self):
        if self.daemon is None:
            return {}
        return {"uri": self.daemon.uri, "machine": self.shell.name}


def wrapper_script(path, ssh_argv):
    """The ssh libvirt runs for qemu+ssh (its ``command=``): ssh with the
    lab's options (core/remote.ssh_base)."""
    Path(path).write_text("#!/bin/sh\nexec " + shlex.join(ssh_argv) +
                          ' "$@"\n')
    Path(path).chmod(0o700)
    return path

