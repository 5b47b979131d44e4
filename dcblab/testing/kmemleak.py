"""kmemleak in a guest (debug flavour): scan on demand, report, forget.

The kernel reports an unreferenced object only once it is older than
kmemleak's minimum age (5 s, MSECS_MIN_AGE): a leak made by one test is
found by the first scan at least 5 s later, which may be a later test's.
After each report the list is cleared, so a leak is reported once.
"""

__all__ = ["Kmemleak", "KMEMLEAK"]

KMEMLEAK = "/sys/kernel/debug/kmemleak"


class Kmemleak:
    def __init__(self, guest):
        self.guest = guest

    def scan(self):
        """Scan now; the report text of new suspected leaks, or ""."""
        self.guest.agent.write_file(KMEMLEAK, "scan")
        text = self.guest.agent.read_file(KMEMLEAK).decode(errors="replace")
        if text.strip():
            self.guest.agent.write_file(KMEMLEAK, "clear")
        return text.strip()
