"""Facts about processes read from /proc, and stopping them.

One place for what the lab, the backends and the reaper all ask: is this
pid still the process we started (start time), is it a zombie, which
processes carry a run id on their command line, and SIGTERM-then-SIGKILL.
"""

import ctypes
import os
import signal
import time
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36

__all__ = ["start_time", "alive", "zombie", "running", "pids_with_tag",
           "kill", "meminfo_used_kib", "rss_kib", "cmdline_head", "zombies",
           "set_subreaper", "reap_adopted", "LAB_COMMANDS", "SIGINT_DEFAULT"]

# An argv prefix that runs a command with SIGINT at its default action.
# A process started with SIGINT ignored (everything a non-interactive
# shell runs with `&`, nohup included) passes SIG_IGN on through exec, and
# Python then installs no KeyboardInterrupt handler: a test that sends
# SIGINT to `dcblab up` or `exec` would see it ignored (CI run in the
# background did: `up` exited 0, `exec` never returned).
SIGINT_DEFAULT = ("env", "--default-signal=INT")

# The command names (comm, 15 characters) of the processes a lab starts
# besides Python: what a leak of a dead lab's processes would show as.
LAB_COMMANDS = ("qemu-system-x86", "libvirtd", "nsenter", "unshare")


def _stat_fields(pid):
    """Fields of /proc/PID/stat after the command name, or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid):
    """The process's start time in clock ticks since boot, or None."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def zombie(pid):
    """True when pid has exited and waits to be reaped (or is gone)."""
    fields = _stat_fields(pid)
    return fields is None or fields[0] == "Z"


def running(pid):
    """True while pid exists and has not exited."""
    return pid is not None and not zombie(pid)


def alive(pid, start=None):
    """True while pid runs and, if start is given, is the same process."""
    if pid is None or not running(pid):
        return False
    return start is None or start_time(pid) == start


def pids_with_tag(tag):
    """Pids of processes whose command line contains the string tag."""
    needle = tag.encode()
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if needle in (d / "cmdline").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


def kill(pids, grace=3.0):
    """SIGTERM, then SIGKILL after grace seconds, until each pid is gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            pids = [p for p in pids if running(p)]
            if not pids:
                return
            time.sleep(0.05)


def meminfo_used_kib(text):
    """MemTotal - MemAvailable of a /proc/meminfo text, in KiB."""
    kv = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return int(kv["MemTotal"].split()[0]) - int(kv["MemAvailable"].split()[0])


def rss_kib(pid):
    """VmRSS of a host process in KiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cmdline_head(pid, words=2):
    """The first words of a process's command line ("" once it is gone)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    return " ".join(a.decode(errors="replace") for a in argv[:words])


def zombies(commands=LAB_COMMANDS, parents=None):
    """"PID COMM" of zombie processes whose command is one of COMMANDS
    (and, with PARENTS, a function of the parent's pid, whose parent it
    accepts)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            text = (d / "stat").read_text()
        except OSError:
            continue
        comm = text[text.find("(") + 1:text.rfind(")")]
        fields = text.rsplit(")", 1)[1].split()
        if fields and fields[0] == "Z" and comm in commands and \
                (parents is None or parents(int(fields[1]))):
            found.append(f"{d.name} {comm}")
    return found


def set_subreaper(on=True):
    """Make this process the one orphans of its descendants are re-parented
    to (PR_SET_CHILD_SUBREAPER), as init would be. On machines whose PID 1
    never reaps (this one's), that is where a dead lab's orphans would
    stay zombies."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap_adopted(mine=(), commands=None):
    """Wait for this process's zombie children that it did not start
    itself (pids not in MINE; with COMMANDS, only those whose comm is one
    of them): orphans it adopted as a subreaper. Returns "PID COMM" of
    each."""
    me, reaped = os.getpid(), []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) in mine:
            continue
        try:
            text = (d / "stat").read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        comm = text[text.find("(") + 1:text.rfind(")")]
        if commands is not None and comm not in commands:
            continue
        if fields[0] == "Z" and int(fields[1]) == me:
            try:
                os.waitpid(int(d.name), os.WNOHANG)
                reaped.append(f"{d.name} {comm}")
            except ChildProcessError:
                pass
    return reaped
