"""What the tests of the guest fuzzers (cgfuzz, dcbfuzz) share: the seed
and kmemleak's timing."""

import os
import random
import time

import pytest

from ..core import flavour
from .kmemleak import KMEMLEAK, MIN_AGE_S, SCAN_TIMEOUT

__all__ = ["SEED_ENV", "FULL_ENV", "fuzz_seed", "full_volume",
           "ready_for_kmemleak"]

SEED_ENV = "DCBLAB_FUZZ_SEED"
# `make fuzz` sets it: every run at its full count, on every flavour.
FULL_ENV = "DCBLAB_FUZZ_FULL"


def fuzz_seed(tool):
    """A new seed, or the one DCBLAB_FUZZ_SEED gives (a seed a run of
    tool printed); a value that is not a number ends the session, exit 2."""
    text = os.environ.get(SEED_ENV)
    if text is None:
        return random.SystemRandom().randrange(2 ** 63)
    try:
        return int(text)
    except ValueError:
        pytest.exit(f"{SEED_ENV}={text!r}: not a number; give the seed a "
                    f"{tool} run printed", returncode=2)


def full_volume():
    """Whether this session runs the fuzzers at full volume on every
    flavour (DCBLAB_FUZZ_FULL=1, `make fuzz`) rather than in the time slot
    the suite gives a slow flavour."""
    return os.environ.get(FULL_ENV) == "1"


def ready_for_kmemleak(guest, ended):
    """kmemleak reports an unreferenced object at the second scan that
    finds it (the first only takes its checksum: update_checksum()) and
    once it is MSECS_MIN_AGE old. The plugin scans once after the last
    test of each file, so a leak of a fuzz run would surface only in a
    later file's scan or at the lab's end: one scan now, and no end before
    the run's last request (ended, time.monotonic()) is 5 s old, make the
    plugin's scan after the file's last test report every object the run
    leaked."""
    if flavour().kmemleak:
        guest.agent.write_file(KMEMLEAK, "scan", timeout=SCAN_TIMEOUT)
        time.sleep(max(0.0, ended + MIN_AGE_S - time.monotonic()))
