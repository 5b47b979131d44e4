"""A view of the host where every write a lab makes is seen, whatever the
machine already holds: the check behind "nothing is added to the host".

A lab run on a machine that already holds what a first run creates (a
directory in /run, a lock file, a cache) shows nothing when compared
before and after: the directory was there. So the promise is checked in a
private mount namespace (held by a small process, ``Sandbox.pid``) where

* the volatile trees, /run, /tmp, /var/tmp and /dev/shm, are empty tmpfs
  (a freshly booted machine's, with only /run/lock and /run/user in /run):
  everything the lab creates there shows, even what an earlier run left on
  the real machine;
* the persistent trees, /etc, /var, /usr, /root, /home, /opt and /srv, are
  overlays of the real ones with an empty upper directory: every file
  created, changed (even opened for writing) or removed, and every
  directory created, lands in the upper directory;
* the places a lab may write (its build directory; the checkout, where
  Python keeps its bytecode) are the real ones, bound back over the
  overlays.

While a sandbox is open this process is a child subreaper: a lab whose
keeper and guard were killed leaves its QEMUs to it, as a machine's init
would get them, and a thread waits for adopted QEMUs and libvirtds at
once, as init would (libvirt waits for a QEMU it kills to be gone, not a
zombie); ``reap_orphans()`` waits for the other orphans (keepers, guards)
between commands, where it cannot take a subprocess's exit status from
under it. (This machine's PID 1 never reaps: there they would stay
zombies whatever dcblab did.)

Commands run in it through ``nsenter --mount`` (``Sandbox.argv``); the
lab's processes, started there, stay there. ``writes()`` lists what is in
the tmpfs and the upper directories. The sandbox's own mounts are made by
system calls (dcblab.core.ns), not mount(8), which would itself write
/run/mount/utab on the host.

``host_state()`` is the rest of the promise, compared before and after:
the root namespace's links and addresses, the named network namespaces,
/proc/modules, the root namespace's nftables ruleset, the mount tables
(the host's and the sandbox's), and the processes carrying a run id.
"""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

from ..core import paths, proc
from ..core.errors import DcblabError
from ..lab.runs import run_dirs

__all__ = ["Sandbox", "SandboxError", "host_state", "diff_state",
           "VOLATILE", "PERSISTENT"]

VOLATILE = ("/run", "/tmp", "/var/tmp", "/dev/shm")
PERSISTENT = ("/etc", "/var", "/usr", "/root", "/home", "/opt", "/srv")
# What a fresh boot has in /run that a lab might use (/var/lock is a
# symlink to /run/lock on Debian); not counted as written.
RUN_SKELETON = {"lock": 0o1777, "user": 0o755}


class SandboxError(DcblabError):
    """The sandbox could not be set up."""


# The holder: run by `python3 -c`, arguments as JSON in argv[1]. It makes
# the namespace, says "ready", then waits for its stdin to close.
_HOLDER = r"""
import json, os, sys
sys.path.insert(0, ROOT)
from dcblab.core import ns
cfg = json.loads(sys.argv[1])
stage = cfg["stage"]
ns.unshare(ns.CLONE_NEWNS)
ns.mount(None, "/", None, ns.MS_REC | ns.MS_PRIVATE)
ns.mount("dcblab-sandbox", stage, "tmpfs", 0, "mode=0700")
keep = []
for i, path in enumerate(cfg["allowed"]):
    k = f"{stage}/keep/{i}"
    os.makedirs(k)
    ns.mount(path, k, None, ns.MS_BIND | ns.MS_REC)
    keep.append((k, path))
for d in cfg["persistent"]:
    up, work = f"{stage}/upper{d}", f"{stage}/work{d}"
    os.makedirs(up)
    os.makedirs(work)
    ns.mount("dcblab-sandbox", d, "overlay", 0,
             f"lowerdir={d},upperdir={up},workdir={work}")
def points():
    with open("/proc/self/mountinfo") as f:
        return [l.split()[4].encode().decode("unicode_escape") for l in f]
for d in cfg["volatile"]:
    # The host's mounts below it (other labs' netns files, say) are gone
    # from this namespace: the sandbox's mount table is its labs' alone.
    for m in sorted((m for m in points() if m.startswith(d + "/")),
                    reverse=True):
        try:
            ns.umount(m)
        except OSError:
            pass
    ns.mount("dcblab-sandbox", d, "tmpfs", 0,
             "mode=1777" if d in ("/tmp", "/var/tmp", "/dev/shm") else
             "mode=0755")
for name, mode in cfg["skeleton"].items():
    os.mkdir(f"/run/{name}")
    os.chmod(f"/run/{name}", mode)
for k, path in keep:
    ns.mount(k, path, None, ns.MS_BIND | ns.MS_REC)
print("ready", flush=True)
sys.stdin.read()
"""


def _covered(path, trees):
    return any(path == t or path.startswith(t + "/") for t in trees)


class Sandbox:
    """A private mount namespace whose writes outside ALLOWED are seen."""

    def __init__(self, allowed=None):
        build = paths.build_dir()
        allowed = [str(Path(p).resolve()) for p in
                   (allowed or (build, paths.ROOT))]
        self.volatile = [d for d in VOLATILE if os.path.isdir(d)]
        self.persistent = [d for d in PERSISTENT if os.path.isdir(d)
                           and not os.path.islink(d)]
        # Only those under a covered tree need binding back (and not one
        # inside another: the outer one's bind brings it).
        covered = [a for a in sorted(set(allowed)) if
                   _covered(a, self.volatile + self.persistent)]
        self.allowed = [a for a in covered if not any(
            a != b and a.startswith(b + "/") for b in covered)]
        self.stage = build / f"sandbox-{os.getpid()}"
        self.holder = None
        self._popens = []
        self._tmp_dev = None

    @property
    def pid(self):
        return self.holder.pid

    def _reap_lab_processes(self, stop):
        while not stop.wait(0.1):
            proc.reap_adopted(commands=("qemu-system-x86", "libvirtd"))

    def start(self):
        self._tmp_dev = None
        proc.set_subreaper(True)
        self._stop_reaper = threading.Event()
        threading.Thread(target=self._reap_lab_processes,
                         args=(self._stop_reaper,), daemon=True).start()
        self.stage.mkdir(parents=True, exist_ok=True)
        cfg = {"stage": str(self.stage), "allowed": self.allowed,
               "persistent": self.persistent, "volatile": self.volatile,
               "skeleton": RUN_SKELETON}
        code = f"ROOT = {str(paths.ROOT)!r}\n" + _HOLDER
        self.holder = subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        line = self.holder.stdout.readline()
        if line.strip() != "ready":
            err = self.holder.stderr.read().strip().splitlines()
            self.close()
            raise SandboxError("sandbox: could not set up its mount "
                               f"namespace: {err[-1] if err else line!r}")
        return self

    def close(self):
        if self.holder is not None:
            try:
                self.holder.stdin.close()
            except OSError:
                pass
            try:
                self.holder.wait(10)
            except subprocess.TimeoutExpired:
                self.holder.kill()
                self.holder.wait()
            self.holder = None
        try:
            self.stage.rmdir()
        except OSError:
            pass
        self.reap_orphans()
        self._stop_reaper.set()
        proc.set_subreaper(False)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # --- running in it -------------------------------------------------------

    def argv(self, argv, cwd=None):
        """ARGV run in the sandbox, in CWD (default: ours; nsenter would
        start it in /)."""
        return ["nsenter", "-t", str(self.pid), "-m",
                f"--wd={cwd or os.getcwd()}", "--", *argv]

    def run(self, argv, cwd=None, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 300)
        return subprocess.run(self.argv(argv, cwd), **kw)

    def popen(self, argv, cwd=None, **kw):
        p = subprocess.Popen(self.argv(argv, cwd), **kw)
        self._popens.append(p)
        return p

    def reap_orphans(self):
        """Wait for the orphans this process adopted (see above)."""
        mine = {p.pid for p in self._popens if p.returncode is None}
        if self.holder is not None:
            mine.add(self.holder.pid)
        self._popens = [p for p in self._popens if p.returncode is None]
        return proc.reap_adopted(mine)

    def path(self, path):
        """PATH as the sandbox sees it, for reading from outside."""
        return Path(f"/proc/{self.pid}/root") / str(path).lstrip("/")

    # --- what it saw ---------------------------------------------------------

    def writes(self):
        """{"added": [...], "changed": [...], "removed": [...]}: paths
        outside the allowed places that the sandbox's processes created,
        wrote (or opened for writing) and removed."""
        out = {"added": [], "changed": [], "removed": []}
        root = self.path("/")
        for d in self.volatile:
            top = root / d.lstrip("/")
            for p in _walk(top):
                rel = "/" + str(p.relative_to(root))
                if d == "/run" and rel[len("/run/"):] in RUN_SKELETON:
                    continue
                out["added"].append(rel)
        for d in self.persistent:
            upper = self.path(f"{self.stage}/upper{d}")
            for p in _walk(upper):
                rel = d + "/" + str(p.relative_to(upper))
                if _covered(rel, self.volatile) or \
                        _covered(rel, self.allowed):
                    continue
                st = p.lstat()
                if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                    out["removed"].append(rel)
                elif not os.path.lexists(rel):
                    out["added"].append(rel)
                elif not stat.S_ISDIR(st.st_mode):
                    out["changed"].append(rel)
                # A directory that exists below: copied up because
                # something inside it changed, which is listed itself.
        return {k: sorted(v) for k, v in out.items()}

    def mounts(self):
        """Mount points in the sandbox (from its mountinfo)."""
        return _mounts(Path(f"/proc/{self.pid}/mountinfo"))

    def owns(self, pid):
        """True if process PID runs in this sandbox: in its mount
        namespace or in one made from it (libvirtd's, its QEMUs'), which
        still hold this sandbox's /tmp (a tmpfs of its own: its device
        number). Other sandboxes' labs, running at the same time, do not
        count."""
        if self._tmp_dev is None:
            for line in Path(f"/proc/{self.pid}/mountinfo").read_text() \
                    .splitlines():
                f = line.split()
                if f[4] == "/tmp":
                    self._tmp_dev = f[2]
        try:
            info = Path(f"/proc/{pid}/mountinfo").read_text()
        except OSError:
            return False
        return any(line.split()[2] == self._tmp_dev and
                   line.split()[4] == "/tmp" for line in info.splitlines())


def _walk(top):
    """Every path below TOP (not TOP), without following symlinks."""
    found = []
    for d, dirs, files in os.walk(top):
        found += [Path(d, x) for x in dirs + files]
    return found


def _mounts(mountinfo):
    return sorted({" ".join(line.split()[3:5]) for line in
                   mountinfo.read_text().splitlines()})


def _out(argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return r.stdout if r.returncode == 0 else f"<{argv[0]} exited " \
        f"{r.returncode}: {r.stderr.strip()}>"


def _addresses():
    links = json.loads(_out(["ip", "-j", "addr", "show"]) or "[]")
    return sorted(f"{x['ifname']} {x.get('operstate')} " + " ".join(
        sorted(f"{a['local']}/{a['prefixlen']}" for a in
               x.get("addr_info", []))) for x in links)


def _run_processes():
    """{pid: run id} of processes carrying a run id, zombies included
    (by their parent's record: a zombie has no command line left)."""
    found = {}
    for pid in proc.pids_with_tag("dcblab.run="):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(
                errors="replace")
        except OSError:
            continue
        m = re.search(r"dcblab\.run=([0-9a-f]+)", cmd)
        if m:
            found[pid] = m.group(1)
    return found


def _host_labs():
    """Run ids and run directories of the labs on the host itself (the
    session's own, another session's): they come and go independently of
    the labs in a sandbox, whose run root is the sandbox's /run."""
    ids, dirs = set(), []
    for d in run_dirs():
        dirs.append(str(d))
        try:
            ids.add(json.loads((d / "state.json").read_text())["run_id"])
        except (OSError, ValueError, KeyError):
            pass
    return ids, dirs


def _in_host_ns(pid):
    try:
        return os.stat(f"/proc/{pid}/ns/mnt").st_ino == \
            os.stat("/proc/self/ns/mnt").st_ino
    except OSError:
        return False


def host_state(sandbox=None):
    """What a lab must leave as it found it, outside any file tree; the
    host's own labs (see _host_labs) left out, and, with a SANDBOX, the
    processes of other sandboxes' labs."""
    if sandbox is not None:
        sandbox.reap_orphans()
    lab_ids, lab_dirs = _host_labs()
    try:
        modules = Path("/proc/modules").read_text()
    except FileNotFoundError:
        modules = "<no /proc/modules: this kernel has no loadable modules>"
    state = {
        "root netns links and addresses": _addresses(),
        "named netns": sorted(_out(["ip", "netns", "list"]).split()),
        "/proc/modules": modules,
        "nft ruleset": _out(["nft", "list", "ruleset"]),
        "host mounts": [m for m in _mounts(Path("/proc/self/mountinfo"))
                        if not any(m.split()[1].startswith(d + "/")
                                   for d in lab_dirs)],
        "processes with a run id": sorted(
            f"{rid} {proc.cmdline_head(pid)}" for pid, rid in
            _run_processes().items() if rid not in lab_ids and
            (sandbox is None or sandbox.owns(pid) or _in_host_ns(pid))),
        "zombies": sorted(proc.zombies(parents=None if sandbox is None else
                                       lambda ppid: ppid == os.getpid() or
                                       sandbox.owns(ppid))),
    }
    if sandbox is not None:
        state["sandbox mounts"] = sandbox.mounts()
    return state


def diff_state(before, after):
    """{what: {"added": [...], "removed": [...]}} for what differs."""
    out = {}
    for k in before:
        b, a = before[k], after.get(k)
        if b == a:
            continue
        if isinstance(b, list):
            out[k] = {"added": sorted(set(a) - set(b)),
                      "removed": sorted(set(b) - set(a))}
        else:
            out[k] = {"before": b, "after": a}
    return out


def remove_stage_leftovers():
    """Staging directories of sandboxes whose holder died (its pid in the
    name), in the build directory."""
    for d in paths.build_dir().glob("sandbox-*"):
        pid = d.name.rpartition("-")[2]
        if pid.isdigit() and not proc.running(int(pid)):
            shutil.rmtree(d, ignore_errors=True)
