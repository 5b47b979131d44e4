"""kmemleak in a guest (debug flavour): scan on demand, report, forget.

The kernel reports an unreferenced object only at the second scan that
finds it unreferenced with the same contents (the first one records its
checksum: mm/kmemleak.c, update_checksum()) and only once it is older
than kmemleak's minimum age (5 s, MSECS_MIN_AGE). The plugin scans after
the last test of each file; that scan is the first for what the file's
last tests allocated, so their leak is reported by a later file's scan;
the plugin scans twice more, past the minimum age, before a lab goes
down, so the last tests' leaks are not lost.
After each report the list is cleared, so a leak is reported once.

A scan runs inside the write of "scan" (the agent's close flushes it) and
walks all of the guest's memory: under TCG, right after boot and with
another lab's guests busy on the same two cores (the splat tests start a
lab inside the test run), CI saw one take over 10 s. SCAN_TIMEOUT leaves
room for that; a scan that outlasts it is still an error.
"""

from typing import TYPE_CHECKING

__all__ = ["Kmemleak", "KMEMLEAK", "MIN_AGE_S"]

if TYPE_CHECKING:
    from .guest import Guest

KMEMLEAK = "/sys/kernel/debug/kmemleak"
MIN_AGE_S = 5  # mm/kmemleak.c: MSECS_MIN_AGE
SCAN_TIMEOUT = 120.0


class Kmemleak:
    """kmemleak of one guest (a Guest)."""

    def __init__(self, guest: "Guest") -> None:
        self.guest = guest

    def scan(self) -> str:
        """Scan now; the report text of new suspected leaks, or ""."""
        self.guest.agent.write_file(KMEMLEAK, "scan", timeout=SCAN_TIMEOUT)
        text = self.guest.agent.read_file(KMEMLEAK, timeout=SCAN_TIMEOUT).decode(errors="replace")
        if text.strip():
            self.guest.agent.write_file(KMEMLEAK, "clear", timeout=SCAN_TIMEOUT)
        return text.strip()
