"""What a lab may have left behind, counted: the census the soak takes
after every cycle (dcblab/scenarios/soak.py), and the tests of it.

A ``Watch`` is made once, before the first lab, by the process that
drives the labs (the soak driver, a test); ``census()`` then lists, scoped
to that driver so that other people's labs on the same machine never
count:

* processes: every descendant of the driver (running or zombie) but the
  sandbox's holder and those it already had when the watch began (a
  pytest session's own lab), and every process carrying one of the run
  ids the caller saw. The driver of a sandbox is a child subreaper, so
  whatever a lab starts stays its descendant even when its keeper and
  guard die; a zombie has no command line left, so processes are named
  by ``comm``;
* network namespaces: named ones (the sandbox's /run/netns, and the
  host's when they name a lab of the caller), nsfs bind mounts (in the
  sandbox, and in the host's mount table when they name a lab of the
  caller), and the namespaces held by the leftover processes;
* taps: in the root namespace (new since the watch began) and in every
  leftover namespace;
* run directories: the run root and anything in it (in the sandbox, or
  the caller's lab names in the host's);
* mounts: added to the sandbox's table, or to the host's naming a lab or
  run of the caller;
* writes: what the sandbox saw written outside the allowed places;
* file descriptors: the driver's own (``/proc/self/fd``) against its
  count when the watch began; and, as a figure only (the whole machine's,
  other work moves it), the host's allocated file handles
  (``/proc/sys/fs/file-nr``).
"""

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..core import proc
from ..lab import run_root

__all__ = ["Watch", "Census", "Leftover", "CATEGORIES", "file_handles",
           "process_table", "descendants", "fd_count"]

# The census's categories, in the order a report names them.
CATEGORIES = ("qemu", "libvirtd", "processes", "netns", "taps", "run dirs",
              "mounts", "writes", "fds")
_QEMU = "qemu-system-x86"    # comm: 15 characters of qemu-system-x86_64
_LIBVIRTD = "libvirtd"


@dataclass(frozen=True)
class Leftover:
    """One leftover process: pid, comm, state letter (Z: zombie), parent."""
    pid: int
    comm: str
    state: str
    ppid: int

    def __str__(self):
        zombie = " (zombie)" if self.state == "Z" else ""
        return f"{self.comm} pid {self.pid}{zombie}, parent {self.ppid}"


@dataclass
class Census:
    """What was found; every list empty and fds 0 when nothing leaked."""
    processes: list = field(default_factory=list)   # Leftover
    netns: list = field(default_factory=list)
    taps: list = field(default_factory=list)
    run_dirs: list = field(default_factory=list)
    mounts: list = field(default_factory=list)
    writes: list = field(default_factory=list)
    fds: int = 0                  # the driver's fds minus its start count
    file_handles: int = 0         # host-wide, minus the start (a figure)

    def counts(self):
        """{category: number found} for every category."""
        comms = [p.comm for p in self.processes]
        return {"qemu": comms.count(_QEMU),
                "libvirtd": comms.count(_LIBVIRTD),
                "processes": sum(c not in (_QEMU, _LIBVIRTD) for c in comms),
                "netns": len(self.netns), "taps": len(self.taps),
                "run dirs": len(self.run_dirs), "mounts": len(self.mounts),
                "writes": len(self.writes), "fds": self.fds}

    def leaks(self):
        """{category: [what]} of the categories that are not 0."""
        out = {}
        procs = {"qemu": [str(p) for p in self.processes if p.comm == _QEMU],
                 "libvirtd": [str(p) for p in self.processes
                              if p.comm == _LIBVIRTD],
                 "processes": [str(p) for p in self.processes
                               if p.comm not in (_QEMU, _LIBVIRTD)]}
        for k, v in procs.items():
            if v:
                out[k] = v
        for k, v in (("netns", self.netns), ("taps", self.taps),
                     ("run dirs", self.run_dirs), ("mounts", self.mounts),
                     ("writes", self.writes)):
            if v:
                out[k] = list(v)
        if self.fds:
            out["fds"] = [f"{self.fds:+d} open in the driver"]
        return out

    def clean(self):
        return not self.leaks()

    def summary(self):
        """One line: each category that leaked, with what."""
        return "; ".join(f"{k}: {', '.join(v)}"
                         for k, v in self.leaks().items()) or "nothing"

    def as_dict(self):
        return {"counts": self.counts(), "leaks": self.leaks(),
                "file_handles_drift": self.file_handles}


# --- reading the machine -----------------------------------------------------

def process_table():
    """{pid: Leftover} of every process on the host (zombies included)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            text = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        comm = text[text.find("(") + 1:text.rfind(")")]
        fields = text.rsplit(")", 1)[1].split()
        table[int(name)] = Leftover(int(name), comm, fields[0],
                                    int(fields[1]))
    return table


def descendants(root, table=None):
    """Pids of every descendant of ROOT (zombies included)."""
    table = process_table() if table is None else table
    children = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def fd_count():
    """Open file descriptors of this process (the listing's own excluded)."""
    return len(os.listdir("/proc/self/fd")) - 1


def file_handles():
    """Allocated file handles on the whole host (/proc/sys/fs/file-nr)."""
    return int(Path("/proc/sys/fs/file-nr").read_text().split()[0])


def _mountinfo(path):
    """{"MOUNTPOINT FSTYPE"} of a mountinfo file."""
    out = set()
    for line in Path(path).read_text().splitlines():
        left, _, right = line.partition(" - ")
        point = left.split()[4].encode().decode("unicode_escape")
        out.add(f"{point} {right.split()[0]}")
    return out


def _netns_of(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _taps(argv_prefix):
    """Names of the tun/tap devices of a namespace, or a one-item list
    saying why it could not be read."""
    r = subprocess.run([*argv_prefix, "ip", "-j", "-d", "link", "show"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return []    # the namespace went away meanwhile
    try:
        links = json.loads(r.stdout or "[]")
    except ValueError:
        return [f"<ip -j: {r.stdout[:60]!r}>"]
    return sorted(x["ifname"] for x in links
                  if x.get("linkinfo", {}).get("info_kind") == "tun")


class Watch:
    """The driver's view of what its labs may leave: a baseline now, a
    census on request. SANDBOX (dcblab.testing.sandbox) when the labs run
    in one; the driver is this process."""

    def __init__(self, sandbox=None):
        self.sandbox = sandbox
        self.me = os.getpid()
        self.root_netns = _netns_of(self.me)
        self.root_taps = set(_taps([]))
        self.had = self._processes(descendants(self.me))
        self.host_mounts = _mountinfo("/proc/self/mountinfo")
        self.sandbox_mounts = self._sandbox_mounts()
        self.host_named = set(self._named(Path("/run/netns")))
        self.fds = fd_count()
        self.file_handles = file_handles()

    @staticmethod
    def _processes(pids):
        """{(pid, start time)}: a pid reused later is another process."""
        return {(p, proc.start_time(p)) for p in pids}

    def _sandbox_mounts(self):
        if self.sandbox is None:
            return set()
        return _mountinfo(f"/proc/{self.sandbox.pid}/mountinfo")

    @staticmethod
    def _named(path):
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def _ours(self, text, names, run_ids):
        return any(n and n in text for n in (*names, *run_ids))

    def census(self, names=(), run_ids=()):
        """A Census of what is left; NAMES are the caller's lab names,
        RUN_IDS the run ids it saw (to find its traces on the host)."""
        sb = self.sandbox
        if sb is not None:
            sb.reap_orphans()
        c = Census()
        # Processes.
        table = process_table()
        mine = descendants(self.me, table)
        if sb is not None:
            mine.discard(sb.pid)
        for rid in run_ids:
            mine |= set(proc.pids_with_tag(f"dcblab.run={rid}"))
        mine.discard(self.me)
        mine = {p for p, t in self._processes(mine) if (p, t) not in self.had}
        c.processes = sorted((table[p] for p in mine if p in table),
                             key=lambda p: p.pid)
        # Network namespaces: named, bound, held by leftover processes;
        # each one once, with every way it is held, and its taps.
        spaces = {}     # "net:[inode]" -> (how held, a path to enter it)

        def found(path, how):
            try:
                key = f"net:[{os.stat(path).st_ino}]"
            except OSError:
                key = str(path)
            spaces.setdefault(key, ([], str(path)))[0].append(how)
        if sb is not None:
            for n in self._named(sb.path("/run/netns")):
                found(sb.path(f"/run/netns/{n}"),
                      f"named /run/netns/{n} (sandbox)")
        for n in sorted(set(self._named(Path("/run/netns")))
                        - self.host_named):
            if self._ours(n, names, run_ids):
                found(f"/run/netns/{n}", f"named /run/netns/{n} (host)")
        sb_added = self._sandbox_mounts() - self.sandbox_mounts
        host_added = {m for m in
                      _mountinfo("/proc/self/mountinfo") - self.host_mounts
                      if self._ours(m, names, run_ids)}
        for where, added in (("sandbox", sb_added), ("host", host_added)):
            for m in sorted(added):
                point, fstype = m.rsplit(" ", 1)
                c.mounts.append(f"{point} ({fstype}, {where})")
                if fstype == "nsfs":
                    found(sb.path(point) if where == "sandbox" else point,
                          f"bound on {point} ({where})")
        for p in c.processes:
            ns = _netns_of(p.pid)
            if ns and ns != self.root_netns:
                spaces.setdefault(ns, ([], f"/proc/{p.pid}/ns/net"))[0] \
                    .append(f"held by pid {p.pid}")
        c.taps = [f"{t} (root netns)" for t in
                  sorted(set(_taps([])) - self.root_taps)]
        for key, (how, path) in sorted(spaces.items()):
            c.netns.append(f"{key} {', '.join(how)}")
            c.taps += [f"{t} (in {key})"
                       for t in _taps(["nsenter", f"--net={path}"])]
        # Run directories.
        root = run_root()
        if sb is not None:
            sroot = sb.path(root)
            if sroot.exists():
                c.run_dirs.append(f"{root} (the run root, sandbox)")
                c.run_dirs += [f"{root / d.name} (sandbox)"
                               for d in sorted(sroot.iterdir())]
        if root.is_dir():
            c.run_dirs += [f"{root / d.name} (host)" for d in
                           sorted(root.iterdir()) if d.name in names]
        # Writes outside the allowed places.
        if sb is not None:
            for kind, found in sb.writes().items():
                c.writes += [f"{kind} {p}" for p in found]
        c.fds = fd_count() - self.fds
        c.file_handles = file_handles() - self.file_handles
        return c
