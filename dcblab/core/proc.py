"""Facts about processes read from /proc, and stopping them.

One place for what the lab, the backends and the reaper all ask: is this
pid still the process we started (start time), is it a zombie, which
processes carry a run id on their command line, and SIGTERM-then-SIGKILL.
"""

import os
import signal
import time
from pathlib import Path

__all__ = ["start_time", "alive", "zombie", "running", "pids_with_tag",
           "kill", "meminfo_used_kib", "rss_kib"]


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
