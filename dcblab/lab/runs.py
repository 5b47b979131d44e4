"""Labs on disk: the run root, each lab's run directory and state.json.

State lives in a 0700 run directory, ``/run/dcblab/<name>/``
(``DCBLAB_RUN`` overrides the parent): ``state.json``, the file the lab's
network namespace is bound on, and one sub-directory per host with that
guest's sockets and logs. The run root is created by the first lab and
removed with the last one, so nothing of dcblab stays in /run (a run
root chosen with DCBLAB_RUN is left where it is).

``lock`` in a run directory is held (flock) by the processes that own the
lab, from the moment ``up`` makes the directory: by ``up`` until the
keeper starts, then by the keeper and its guard. A run directory whose
lock nobody holds belongs to a dead lab, whatever state it got to (even
one killed before its keeper wrote state.json): the reaper removes it.
"""

import dataclasses
import errno
import fcntl
import json
import os
import re
from pathlib import Path

from ..core import proc
from ..core.errors import DcblabError, UnknownName, UsageError
from ..topology import load

__all__ = ["LabError", "run_root", "lab_dir", "list_labs", "read_state",
           "write_state", "check_name", "keeper_alive", "rc_text",
           "make_lab_dir", "owned", "run_dirs", "remove_run_root",
           "load_lab_topology", "run_tag",
           "NAME_PATTERN", "SOCKET", "TOPOLOGY", "LOCK"]

# In a lab's run directory: the keeper's socket, the topology's copy, the
# owners' lock.
SOCKET = "keeper.sock"
TOPOLOGY = "topology.toml"
LOCK = "lock"

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,15}$"
_NAME = re.compile(NAME_PATTERN)


class LabError(DcblabError):
    """A lab is not up, already up, or could not be brought up."""


class UnknownLab(LabError, UnknownName):
    """No lab of the name the user gave is up (exit 2, as an unknown host
    or link)."""


def run_tag(run_id):
    """The word every process of run ``run_id`` has on its argv (its
    guests, their daemons, a split lab's ssh sessions)."""
    return f"dcblab.run={run_id}"


def run_root():
    return Path(os.environ.get("DCBLAB_RUN", "/run/dcblab"))


def lab_dir(name):
    return run_root() / name


def check_name(name):
    if not _NAME.match(name):
        raise UsageError(f"lab name {name!r} must match {NAME_PATTERN} (it "
                         "names the netns and the run directory)")
    return name


def make_lab_dir(name):
    """Make lab NAME's run directory and take its lock: the lock's file
    descriptor (inheritable: the keeper gets it). LabError if the lab
    exists."""
    for _ in range(10):
        run_root().mkdir(mode=0o755, parents=True, exist_ok=True)
        try:
            lab_dir(name).mkdir(mode=0o700)
        except FileExistsError:
            raise LabError(f"lab {name!r} is already up ({lab_dir(name)}): "
                           f"`dcblab down --name {name}`, or `dcblab reap` "
                           "if its keeper died") from None
        except FileNotFoundError:
            continue  # the last lab's down removed the run root meanwhile
        try:
            fd = os.open(lab_dir(name) / LOCK,
                         os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except FileNotFoundError:
            raise LabError(f"lab {name}: its run directory was removed "
                           "while it started (a `dcblab reap` at that "
                           "instant?): try again") from None
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.set_inheritable(fd, True)
        return fd
    raise LabError(f"{run_root()}: cannot create a lab directory there")


def owned(rundir):
    """True while a process holds the lock of the run directory RUNDIR (a
    lab that is starting, up or stopping). False for a dead lab's, and for
    a directory without a lock (up killed between its two steps)."""
    try:
        fd = os.open(Path(rundir) / LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return True
        raise
    finally:
        os.close(fd)
    return False


def run_dirs():
    """Every lab run directory under the run root, with or without
    state.json."""
    root = run_root()
    try:
        return sorted(d for d in root.iterdir() if d.is_dir())
    except FileNotFoundError:
        return []


def remove_run_root():
    """Remove /run/dcblab once no lab is left in it (rmdir: it fails,
    harmlessly, while anything is inside). A directory the user chose
    with DCBLAB_RUN is theirs: it stays."""
    if os.environ.get("DCBLAB_RUN"):
        return
    try:
        run_root().rmdir()
    except OSError:
        pass


def list_labs():
    root = run_root()
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir()
                  if (d / "state.json").exists())


def load_lab_topology(name, path):
    """The topology of lab NAME from its run directory's copy at PATH,
    its errors naming the lab ("lab NAME: unknown host ...") rather than
    that copy, which the user never wrote."""
    return dataclasses.replace(load(path), path=f"lab {name}")


def read_state(name):
    """The lab's state.json as a dict; LabError naming the labs up if none."""
    try:
        return json.loads((lab_dir(name) / "state.json").read_text())
    except FileNotFoundError:
        known = ", ".join(list_labs()) or "none"
        raise UnknownLab(f"no lab named {name!r} is up (labs up: {known}); "
                         "start one with `dcblab up`") from None
    except ValueError as e:
        raise LabError(f"{lab_dir(name) / 'state.json'}: unreadable ({e}); "
                       "`dcblab reap` removes it") from None


def write_state(name, state):
    """Replace state.json atomically (a reader never sees half a file)."""
    path = lab_dir(name) / "state.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(path)


def rc_text(rc):
    """A gone guest's recorded QEMU exit status, for messages: "unknown"
    when the keeper did not reap it (libvirt daemonises QEMU)."""
    return "unknown" if rc is None else rc


def keeper_alive(state):
    """True while the keeper recorded in a lab's state runs (pid and start
    time, so a reused pid does not count)."""
    pid = state.get("keeper_pid")
    return bool(pid) and proc.alive(pid, state.get("keeper_start"))
