"""Guest serial consoles: waiting for lines and spotting kernel splats.

QEMU writes each guest's serial console to a log file.  A ``Console`` reads
that file incrementally: ``wait_for()`` blocks until a line matches (bounded
by a timeout that names what was awaited), ``splats()`` returns the
kernel error reports that appeared since the last look, and
``boot_failure()`` the first line saying the guest's boot failed.
"""

import os
import re
import time
from pathlib import Path

from ..core.errors import DcblabError

__all__ = ["SPLAT_PATTERNS", "BOOT_FAILURES", "Console", "ConsoleTimeout",
           "BootFailed", "find_splats", "find_boot_failure"]

# What the kernel prints when something went wrong inside it.
SPLAT_PATTERNS = (
    "Oops",
    "BUG:",
    "WARNING:",
    "KASAN",
    "Call Trace",
    "] RIP: ",
    "Kernel panic",
    "unreferenced object",
    "blocked for more than",
)
_SPLAT_RE = re.compile("|".join(re.escape(p) for p in SPLAT_PATTERNS))
# Lines of context quoted after the first splat line of a report.
_CONTEXT = 12

# What a console says when a guest's boot failed: the guest will never be
# ready, so whoever waits for it stops at once, naming the line. A panic
# (panic=-1 and QEMU's -no-reboot end the VM at once; its line is the
# reason); an initramfs that did not fit in the rootfs tmpfs (init runs
# without the files cut off, the archive's last: the agent may answer,
# whatever needs them fails later); a step of the guest's init that
# failed (guest-image/init).
BOOT_FAILURES = (
    "Kernel panic - not syncing: ",
    "Initramfs unpacking failed: ",
    "dcblab-init: FAILED: ",
)
_BOOT_FAILURE_RE = re.compile("^.*(?:" + "|".join(
    re.escape(p) for p in BOOT_FAILURES) + ").*$", re.M)


def find_splats(text):
    """Quote every splat in console text: a list of multi-line strings.

    Each entry is the matching line and the lines that follow it (the
    report's body), so a test failure shows what the kernel said.
    """
    lines = text.splitlines()
    found, skip_until = [], -1
    for i, line in enumerate(lines):
        if i <= skip_until or not _SPLAT_RE.search(line):
            continue
        end = min(len(lines), i + 1 + _CONTEXT)
        found.append("\n".join(lines[i:end]))
        skip_until = end - 1
    return found


def find_boot_failure(text):
    """The first console line that says the boot failed (BOOT_FAILURES),
    stripped, or None."""
    m = _BOOT_FAILURE_RE.search(text)
    return m.group(0).strip() if m else None


class ConsoleTimeout(DcblabError, TimeoutError):
    pass


class BootFailed(DcblabError):
    """The console said the guest's boot failed; ``line`` is what it
    said."""

    def __init__(self, message, line):
        super().__init__(message)
        self.line = line


class Console:
    """Incremental reader of one guest's console log file."""

    def __init__(self, path, name="guest"):
        self.path = Path(path)
        self.name = name
        self._splat_offset = 0

    def text(self):
        try:
            return self.path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines=60):
        return "\n".join(self.text().splitlines()[-lines:])

    def mark(self):
        """Offset to pass to splats(since=...) later."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def boot_failure(self):
        """The first line of this boot saying it failed, or None."""
        return find_boot_failure(self.text())

    def splats(self, since=None):
        """Splats printed after offset ``since`` (default: since last call)."""
        start = self._splat_offset if since is None else since
        try:
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_size < start:
                    start = 0  # a new log: the guest was restarted
                f.seek(start)
                data = f.read()
        except FileNotFoundError:
            return []
        # Only whole lines: a report still being printed is read next time.
        cut = data.rfind(b"\n") + 1
        if since is None:
            self._splat_offset = start + cut
        return find_splats(data[:cut].decode(errors="replace"))

    def wait_for(self, pattern, timeout, alive=None, since=0):
        """Block until a console line matches ``pattern``; return the match.

        ``alive`` is a callable returning False once the guest is gone, so a
        dead guest fails at once rather than at the timeout. A line of
        BOOT_FAILURES raises BootFailed at once, even after the match: an
        init that started from a broken initramfs is no boot.
        """
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            text = self.text()[since:]
            failed = find_boot_failure(text)
            if failed:
                raise BootFailed(f"{self.name}: the boot failed: {failed} "
                                 f"(console {self.path})", failed)
            m = rx.search(text)
            if m:
                return m
            if alive is not None and not alive():
                raise ConsoleTimeout(
                    f"{self.name}: QEMU exited while waiting for console "
                    f"line /{pattern}/; console tail:\n{self.tail(20)}")
            if time.monotonic() >= deadline:
                raise ConsoleTimeout(
                    f"{self.name}: no console line /{pattern}/ within "
                    f"{timeout}s; console tail:\n{self.tail(20)}")
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
