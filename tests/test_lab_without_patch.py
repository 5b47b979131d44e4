"""Lab 14 (docs/labs/14-tx-queue.md) beside the kernel without patch 0004.

The lab runs on the lab kernel in the suite; it quotes what stock 6.1
does instead: a connected UDP socket keeps its first TX queue when its
priority changes. This runs the lab on the lab kernel of the series
without 0004 (`make kernel-without PATCH=0004`, dcblab.build.variants:
BUILD/variants/without-0004/), booted in a lab of its own, with the lines
the lab quotes for that kernel in place of the lab kernel's, and every
other line as written: each step must print what it says. So the lab's
stock figures are measured in each run of the suite, and a change of the
patch that made the two kernels agree would fail here.
"""

import os
from pathlib import Path

import pytest
from sybil.example import SybilFailure

from dcblab.build.variants import kernel_without, patch_named
from dcblab.testing.labs_pytest import LABS_DIR, SYBIL
from dcblab.testing.plugin import lab_on_kernel

LAB = LABS_DIR / "14-tx-queue.md"
# (a line of the lab as the lab kernel prints it, which occurrence of it
# (1-based, in the lab as written), the line without patch 0004): the
# connected UDP socket moved from silver to gold after 1000 of its 2000
# frames, then its SO_PRIORITY changed after 10 of 20 (Try next).
WITHOUT_0004 = [
    ("queue 2: 1000", 1, "queue 2: 2000"),
    ("queue 5: 1000", 1, "queue 5: 0"),
    (" Sent 106000 bytes 1000 pkt (dropped 0, overlimits 0 requeues 0)", 1,
     " Sent 212000 bytes 2000 pkt (dropped 0, overlimits 0 requeues 0)"),
    (" Sent 106000 bytes 1000 pkt (dropped 0, overlimits 0 requeues 0)", 2,
     " Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)"),
    ("queue 2: 10", 1, "queue 2: 20"),
    ("queue 5: 10", 1, "queue 5: 0"),
]


@pytest.fixture(scope="module")
def without_0004(request):
    """A two-hosts lab on the kernel without 0004: built on first use
    (from the lab kernel's objects, dcblab/build/seed.py: ~1 min), booted
    cold."""
    bzimage, _ = kernel_without(patch_named("0004"))
    # kernel_without() builds the lab flavour, whatever the session's
    yield from lab_on_kernel(request, bzimage, f"no0004-{os.getpid()}",
                             flavour_name="lab")


def _as_without_0004(tmp_path):
    lines = LAB.read_text().split("\n")
    at = {}
    for line, nth, _ in WITHOUT_0004:
        found = [i for i, ln in enumerate(lines) if ln == line]
        assert len(found) >= nth, f"{LAB}: {line!r} is not in the lab " \
                                  f"{nth} time(s): update WITHOUT_0004"
        at[(line, nth)] = found[nth - 1]
    for line, nth, other in WITHOUT_0004:
        lines[at[(line, nth)]] = other
    path = Path(tmp_path) / LAB.name
    path.write_text("\n".join(lines))
    return path


def test_the_lab_quotes_the_figures_it_is_checked_against():
    """The prose says what this test measures: the queue counts without
    0004, for the move and for the SO_PRIORITY change."""
    text = LAB.read_text()
    for quoted in ("`queue 2: 2000`, `queue 5: 0`",
                   "`Sent 212000 bytes 2000 pkt`",
                   "`queue 2: 20`, `queue 5: 0`"):
        assert quoted in text, quoted


def test_lab_14_without_patch_0004_keeps_the_cached_queue(without_0004,
                                                          tmp_path):
    path = _as_without_0004(tmp_path)
    doc = SYBIL.parse(path)
    doc.namespace["course"] = without_0004
    try:
        for example in doc:
            try:
                example.evaluate()
            except SybilFailure as e:
                pytest.fail(f"lab 14 on the kernel without 0004:\n{e}",
                            pytrace=False)
    finally:
        without_0004.restore()
