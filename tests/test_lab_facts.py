"""Each teaching lab can fail: one observed fact of it, the one its
verdict stands on, edited to what a student might expect instead, and the
lab run on the session's lab up to that fact must fail there, with a diff
showing the edit against what the guests printed. A lab whose expected
output matched anything (a ``\\d+`` where the lesson is a value, a count
that accepts 0) would pass here and fail this test.

The labs as written pass in the suite (docs/labs/ is collected with the
tests); this file runs each one again up to its fact, from the baseline.
"""

from pathlib import Path

import pytest
from sybil.example import SybilFailure

from dcblab.testing.dcb import switch_pfc_back
from dcblab.testing.labdoc import causes, parse
from dcblab.testing.labs_pytest import LABS_DIR, SYBIL, session_lab

# lab -> (an expected line as the lab writes it, which occurrence of it
# (1-based), the line a wrong belief would expect)
FACTS = {
    "01-identity.md": ("4 cgroups, 4 distinct indexes", 1,
                       "4 cgroups, 3 distinct indexes"),
    "02-socket-identity.md": (
        "     10 prioidx={{gold}} old_priority=0 new_priority=5 applied=1", 1,
        "     10 prioidx={{silver}} old_priority=0 new_priority=2 "
        "applied=1"),
    "03-ifpriomap.md": ("dummy0 0", 2, "dummy0 4"),
    "04-so-priority.md": (
        "     2         10        0      0         0  pcp6=10 vid100=10 "
        "prio6=10", 1,
        "     2         10        0      0         0  pcp2=10 vid100=10 "
        "prio6=10"),
    "05-why-net-prio.md": ("10:3 Sent 440 bytes 10 pkt", 1,
                           "10:3 Sent 0 bytes 0 pkt"),
    "06-net-cls-nftables.md": (
        "\t\tmeta cgroup 1048577 counter packets 3 bytes 252", 1,
        "\t\tmeta cgroup 1048577 counter packets 6 bytes 504"),
    "07-no-hierarchy.md": ("eth0.100 3", 2, "eth0.100 6"),
    "08-priority-to-wire.md": ("     10 vlan 100, p 0", 1,
                               "     10 vlan 100, p 5"),
    "09-dcb-app.md": (
        "     1         10        0      0         0  pcp0=10 vid100=10 "
        "prio0=10", 1,
        "     1         10        0      0         0  pcp5=10 vid100=10 "
        "prio0=10"),
    "10-hierarchy-membership.md": (
        '\t\tsocket cgroupv2 level 2 "unified/team" counter packets 0 '
        'bytes 0', 1,
        '\t\tsocket cgroupv2 level 2 "unified/team" counter packets 3 '
        'bytes 252'),
    "11-bpf-sock-create.md": (
        "     5         10        0      0         0  pcp5=10 vid100=10 "
        "prio0=10", 1,
        "     5         10        0      0         0  pcp2=10 vid100=10 "
        "prio0=10"),
    "12-pfc.md": (
        "     1       1700        0      0         0  pcp3=1700 vid100=1700 "
        "prio3=1700", 1,
        "     1       1400        0      0         0  pcp3=1400 vid100=1400 "
        "prio3=1400"),
    "14-tx-queue.md": ("queue 5: 1000", 1, "queue 5: 0"),
    "16-roce-needs-pfc.md": ("with PFC: more than 6 Mbit/s (swp3: 10)", 1,
                             "with PFC: less than 6 Mbit/s (swp3: 10)"),
    "13-cgroup-v2.md": (
        "     3         20        0      0         0  pcp0=20 vid100=20 "
        "prio0=20", 1,
        "     3         20        0      0         0  pcp0=10 pcp5=10 "
        "vid100=20 prio0=20"),
}


def _edited(name, tmp_path):
    """The lab with its fact edited, and the step whose output holds it."""
    line, nth, wrong = FACTS[name]
    lines = (LABS_DIR / name).read_text().split("\n")
    at = [i for i, ln in enumerate(lines) if ln == line]
    assert len(at) >= nth, f"{name}: {line!r} is not in the lab " \
                           f"{nth} time(s): the lab changed, update FACTS"
    i = at[nth - 1]
    lines[i] = wrong
    path = tmp_path / name
    path.write_text("\n".join(lines))
    steps = [s for b in parse(path.read_text(), path) for s in b.steps]
    step = max((s for s in steps if s.line <= i + 1), key=lambda s: s.line)
    assert wrong in step.expected, f"{name}:{i + 1} is not an output line"
    return path, step


def test_every_lab_has_a_fact():
    # A troubleshooting lab (one with causes) has its own, stronger test:
    # tests/test_lab_troubleshoot.py runs it once per cause.
    assert sorted(FACTS) == sorted(
        p.name for p in LABS_DIR.glob("[0-9][0-9]-*.md")
        if not causes(p.read_text(), p))


def _on_fabric(name):
    path = LABS_DIR / name
    return session_lab(path, path.read_text()) == "fabric"


@pytest.mark.parametrize("name", [n for n in sorted(FACTS)
                                  if not _on_fabric(n)])
def test_a_changed_fact_fails_the_lab(name, lab, tmp_path):
    _fails_at_the_fact(name, lab, tmp_path)


# The fabric's labs on the session fabric, with the fabric's tests (the
# plugin sorts items that use the fixture last).
@pytest.mark.parametrize("name", [n for n in sorted(FACTS) if _on_fabric(n)])
def test_a_changed_fact_fails_the_fabric_lab(name, fabric, tmp_path):
    _fails_at_the_fact(name, fabric, tmp_path)


def _fails_at_the_fact(name, lab, tmp_path):
    path, step = _edited(name, tmp_path)
    lab.restore()
    doc = SYBIL.parse(Path(path))
    doc.namespace["course"] = lab
    try:
        with pytest.raises(SybilFailure) as e:
            for example in doc:
                example.evaluate()
    finally:
        lab.restore()
        # A lab stopped at its fact leaves what it would have put back
        # later: lab 16's fact comes before it turns PFC off, and a
        # switch's PFC is put back here should a lab's ever come after.
        switch_pfc_back(lab)
    text = str(e.value)
    # It failed at the edited fact, not before it (the lab as written
    # passes up to there), and the diff shows the edit.
    assert f"{path}:{step.line}: {step.prompt}" in text, text[:600]
    assert "\n-" + FACTS[name][2] + "\n" in text, text
