"""Labs on disk: the run root, each lab's run directory and state.json.

State lives in a 0700 run directory, ``/run/dcblab/<name>/``
(``DCBLAB_RUN`` overrides the parent): ``state.json`` and one
sub-directory per host with that guest's sockets and logs.
"""

import json
import os
import re
from pathlib import Path

from ..core import proc
from ..core.errors import DcblabError, UsageError

__all__ = ["LabError", "run_root", "lab_dir", "list_labs", "read_state",
           "write_state", "check_name", "keeper_alive", "rc_text",
           "NAME_PATTERN", "SOCKET", "TOPOLOGY"]

# In a lab's run directory: the keeper's socket, the topology's copy.
SOCKET = "keeper.sock"
TOPOLOGY = "topology.toml"

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,15}$"
_NAME = re.compile(NAME_PATTERN)


class LabError(DcblabError):
    """A lab is not up, already up, or could not be brought up."""


def run_root():
    return Path(os.environ.get("DCBLAB_RUN", "/run/dcblab"))


def lab_dir(name):
    return run_root() / name


def check_name(name):
    if not _NAME.match(name):
        raise UsageError(f"lab name {name!r} must match {NAME_PATTERN} (it "
                         "names the netns and the run directory)")
    return name


def list_labs():
    root = run_root()
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir()
                  if (d / "state.json").exists())


def read_state(name):
    """The lab's state.json as a dict; LabError naming the labs up if none."""
    try:
        return json.loads((lab_dir(name) / "state.json").read_text())
    except FileNotFoundError:
        known = ", ".join(list_labs()) or "none"
        raise LabError(f"no lab named {name!r} is up (labs up: {known}); "
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
