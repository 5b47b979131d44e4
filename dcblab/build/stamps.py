"""Stamps: a step that succeeded on the same inputs is not run again.

A stamp is a small JSON file a step writes after it succeeded: the digest
of every input it read and, for a step that makes a file, that file's size
and mtime.  While every input digests the same and every output is still
the file the stamp recorded, the step is skipped with one line saying so.
The stamp is removed before the step runs, so a failed or interrupted run
leaves none and the next one runs the step again.

checkpatch    BUILD/.checkpatch-inputs
check-series  BUILD/.check-series-inputs
kernel        BUILD/kernel-obj[-NAME]/.dcblab-kernel-inputs (one per flavour)

What each hashes is decided next to the step (checks.py, series.py,
kernel.py); ``force`` runs a step whatever its stamp says (``make ...
FORCE=1``).
"""

import json
import subprocess

from dcblab.core import paths

from .common import say

__all__ = ["Stamp", "run_once", "check_stamp_path", "tool_version",
           "forget_check_stamps"]

_CHECKS = ("checkpatch", "check-series")


class Stamp:
    """The inputs a step is about to read and the files it will make.

    inputs is {name: digest}, taken before the step runs: an input edited
    while the step runs no longer matches and the next run repeats it.
    """

    def __init__(self, path, inputs, outputs=()):
        self.path = path
        self.inputs = dict(inputs)
        self.outputs = list(outputs)

    def _recorded(self):
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None

    def changed(self):
        """Why the step must run: [] when the stamp still holds."""
        old = self._recorded()
        if old is None:
            return ["no stamp"]
        was = old.get("inputs", {})
        why = sorted(k for k in self.inputs.keys() | was.keys()
                     if self.inputs.get(k) != was.get(k))
        made = old.get("outputs", {})
        for out in self.outputs:
            if _identity(out) != made.get(str(out)):
                why.append(f"{out.name} (missing or replaced)")
        return why

    def write(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(
            {"inputs": self.inputs,
             "outputs": {str(o): _identity(o) for o in self.outputs}},
            indent=1, sort_keys=True) + "\n")
        tmp.replace(self.path)

    def remove(self):
        self.path.unlink(missing_ok=True)


def _identity(path):
    try:
        st = path.stat()
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}"


def run_once(step, stamp, run, skipped, force=False):
    """run() unless stamp holds; the stamp is written only if run() returns
    0 (or None) without raising.  Returns run()'s status, 0 when skipped.

    skipped is the line printed instead of running.
    """
    why = ["forced"] if force else stamp.changed()
    if not why:
        say(f"{step}: {skipped} (stamp {stamp.path}; FORCE=1 runs it anyway)")
        return 0
    if force:
        say(f"{step}: running (forced)")
    elif why != ["no stamp"]:
        shown = ", ".join(why[:3]) + (", ..." if len(why) > 3 else "")
        say(f"{step}: running, changed since the last clean run: {shown}")
    stamp.remove()
    rc = run()
    if not rc:
        stamp.write()
    return rc or 0


def check_stamp_path(step):
    """Where checkpatch or check-series keeps its stamp: both check the
    series alone, so one stamp serves every flavour."""
    return paths.build_dir() / f".{step}-inputs"


def tool_version(argv):
    """First line of a tool's --version, an input of the step it runs."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True)
    except OSError as e:
        return f"unavailable: {e}"
    return (r.stdout or r.stderr).partition("\n")[0]


def forget_check_stamps():
    """Remove the checkpatch and check-series stamps, so their next run
    checks the series again (``make bench`` times such a cold run).  The
    kernel stamps stay.  Returns the stamps that existed."""
    gone = []
    for step in _CHECKS:
        path = check_stamp_path(step)
        if path.exists():
            path.unlink()
            gone.append(path)
    return gone
