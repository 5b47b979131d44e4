"""cgfuzz in h1: fuzzed net_prio.ifpriomap and net_cls.classid writes,
each answered as Linux 6.1's code answers it, under churn.

tools/cgfuzz.c writes generated inputs (valid, malformed, overlong, out of
range, unknown devices, devices being added and deleted, cgroups being
made and removed) from several threads while others make and remove
cgroups, add and delete dummy and VLAN devices and move tasks between
cgroups; it checks each errno against its model of the kernel's parsers
(tools/cgmodel.c, unit-tested by `make tools-check`) and reads the maps
back. One run serves the three tests. Kernel splats fail a test through
the plugin; on the debug flavour the plugin's kmemleak scan after the
first test reports whatever the run leaked (see dcblab.testing.fuzz.ready_for_kmemleak).

The seed is new each run and printed (pytest -s, and the guest command
in a failure's report); DCBLAB_FUZZ_SEED=N replays a run's inputs (each
writer's sequence; the threads' interleaving is the machine's).
docs/testing.md has the figures.
"""

import json
import time

import pytest

from dcblab.testing import NETCLS, NETPRIO
from dcblab.testing.fuzz import SEED_ENV, fuzz_seed, ready_for_kmemleak

WRITES = 100_000
WRITERS = 4
# The run's own bound (cgfuzz --seconds); the agent waits two minutes more
# for its setup and cleanup. Measured here under TCG (docs/testing.md):
# 10^5 writes took 2-10 s on the lab kernel, 35-60 s on the debug kernel
# on an idle host and more than 300 s with other labs on its two cores.
BOUND_S = 900
# The categories cgfuzz draws, per file (cgmodel.h); classid has no device.
CATEGORIES = {
    "net_prio.ifpriomap": ["valid", "malformed", "overlong", "range",
                           "unknown_dev", "gone_dev", "gone_cgroup"],
    "net_cls.classid": ["valid", "malformed", "overlong", "range",
                        "gone_cgroup"],
}
# What the churn threads do (cgfuzz's "churn" counts).
CHURN = ("cgroups_made", "cgroups_removed", "links_added", "links_deleted",
         "moves")



def _ours(guest):
    """cgfuzz's cgroups and devices present in the guest now."""
    left = []
    for root in (NETPRIO, NETCLS):
        out = guest.run(["ls", root]).stdout.split()
        left += [f"{root}/{n}" for n in out if n.startswith("cgfuzz-")]
    out = guest.run(["ls", "/sys/class/net"]).stdout.split()
    return left + [n for n in out if n.startswith("cgfz-")]




@pytest.fixture(scope="module")
def fuzz_run(request, dcblab_labs):
    """One cgfuzz run in h1: (seed, its JSON report, its stderr, the
    cgfuzz objects found in h1 before and after it)."""
    guest = dcblab_labs.for_node(request.node).h1
    seed = fuzz_seed("cgfuzz")
    print(f"cgfuzz seed {seed} (replay: {SEED_ENV}={seed})")
    before = _ours(guest)
    res = guest.run(["cgfuzz", "-j", "--seed", str(seed), "--writes",
                     str(WRITES), "--writers", str(WRITERS), "--seconds",
                     str(BOUND_S)], check=False, timeout=BOUND_S + 120)
    ended = time.monotonic()
    after = _ours(guest)
    ready_for_kmemleak(guest, ended)
    try:
        report = json.loads(res.stdout)
    except ValueError:
        pytest.fail(f"cgfuzz --seed {seed} exited {res.rc} without its "
                    f"JSON report:\n{res.stdout}\n{res.stderr}")
    print(f"cgfuzz: {report['writes']} writes in {report['seconds']:.1f} s "
          f"({report['writes_per_s']:.0f}/s), {report['churn']}")
    return seed, report, res.stderr, before, after


def test_every_fuzzed_write_gets_the_answer_of_61s_code(fuzz_run):
    seed, report, stderr, _, _ = fuzz_run
    why = f"cgfuzz --seed {seed}:\n{stderr}"
    assert report["seed"] == seed
    assert report["mismatches"] == 0, \
        f"{why}\n{json.dumps(report['mismatch_examples'], indent=1)}"
    assert report["readback_errors"] == 0, why
    assert report["churn"]["errors"] == 0, why
    assert report["stopped"] == "writes", \
        f"{why}\n{report['writes']} of {WRITES} writes in {BOUND_S} s"
    assert report["writes"] >= WRITES, why


def test_fuzzing_exercised_every_category_and_every_churn(fuzz_run):
    seed, report, _, _, _ = fuzz_run
    counts = {f: {c: sum(report["outcomes"][f][c].values()) for c in cats}
              for f, cats in CATEGORIES.items()}
    assert all(n > 0 for cats in counts.values() for n in cats.values()), \
        f"cgfuzz --seed {seed}: {counts}"
    churn = {k: report["churn"][k] for k in CHURN}
    assert min(churn.values()) > 0, f"cgfuzz --seed {seed}: {churn}"
    assert report["readbacks"] > 0


def test_fuzzing_leaves_no_cgroups_or_devices(fuzz_run):
    seed, report, _, before, after = fuzz_run
    assert before == [], "cgfuzz objects before the run"
    assert (report["leftovers"], after) == (0, []), f"cgfuzz --seed {seed}"
