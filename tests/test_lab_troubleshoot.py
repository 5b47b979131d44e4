"""The troubleshooting lab (docs/labs/15-not-pcp-5.md): every cause it can
plant is real and curable. For each cause, on the session's lab from the
baseline: the lab's blocks as written, the cause planted where the lab
says, its fix run where `dcblab lab` runs it; every step must print what
the lab says, so each cause gives the symptom (no frame at PCP 5) and its
fix alone cures it. Without a cause the symptom block fails: the lab's
symptom comes from the cause, not from the set-up. And `dcblab lab`
plants the cause a seed picks and scores the student's answer.

Cause (h) moves eth0.100 into a namespace, and a VLAN device in a
namespace the restore deletes is destroyed with it
(`default_device_exit_net()` moves back to init_net only devices
without rtnl_link_ops or with netns_refund; a VLAN device has
rtnl_link_ops, without netns_refund). Its fix moves the device back; if
a step before the fix fails, the restore makes the baseline again
(dcblab.lab.baseline.restore), so the causes after it still find it."""

import json
import subprocess
import sys

import pytest

from dcblab.core.paths import ROOT
from dcblab.testing.labdoc import (LabRun, cause_steps, causes,
                                   guest_runner, host_runner, parse)

LAB = ROOT / "docs" / "labs" / "15-not-pcp-5.md"
DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]
CAUSES = causes(LAB.read_text(), LAB)


def _run(lab, cause):
    """Every step's Outcome, the cause (or None) planted and fixed."""
    run = LabRun(lab.guests,
                 guest_runner(lambda host, argv, timeout: lab.guest(host).run(
                     argv, check=False, timeout=timeout)),
                 host_runner(lab.name))
    outcomes = []
    for block in parse(LAB.read_text(), LAB):
        plant, fix = cause_steps(block, cause)
        for step in (*plant, *fix, *block.steps):
            o = run.run(block, step, run.command(block, step))
            outcomes.append(o)
            if not o.ok:
                return outcomes
    return outcomes


def test_the_lab_has_nine_causes():
    assert [c.letter for c in CAUSES] == list("abcdefghi")


@pytest.mark.parametrize("cause", CAUSES, ids=[c.letter for c in CAUSES])
def test_each_cause_gives_the_symptom_and_its_fix_cures_it(lab, cause):
    lab.restore()
    try:
        outcomes = _run(lab, cause)
    finally:
        lab.restore()
    bad = [o for o in outcomes if not o.ok]
    assert not bad, f"({cause.letter}) {cause.text}:\n{bad[0].diff}"
    shown = [o.output[-1] for o in outcomes if o.output and
             o.output[-1].startswith("flow 1:")]
    assert shown == ["flow 1: 10 received, 0 at PCP 5",
                     "flow 1: 10 received, 10 at PCP 5"]


def test_without_a_cause_the_symptom_is_not_there(lab):
    lab.restore()
    try:
        outcomes = _run(lab, None)
    finally:
        lab.restore()
    assert not outcomes[-1].ok
    assert outcomes[-1].output[-1] == "flow 1: 10 received, 10 at PCP 5"


def test_cli_plants_what_the_seed_picks_and_scores_the_answer(lab):
    teacher = subprocess.run(DCBLAB + ["lab", "--teacher", "-j", "--seed",
                                       "3", str(LAB)], capture_output=True,
                             text=True, timeout=60)
    planted = json.loads(teacher.stdout)["planted"]
    r = subprocess.run(DCBLAB + ["lab", "--name", lab.name, "-j", "--seed",
                                 "3", "--predict", planted, str(LAB)],
                       capture_output=True, text=True, timeout=300)
    try:
        res = json.loads(r.stdout)
    finally:
        lab.restore()
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    assert (res["planted"], res["seed"]) == (planted, 3)
    assert [(p["answer"], p["right"]) for p in res["predictions"]] == \
        [(planted, True)]
    assert "seed 3: `--seed 3` plants the same one again" in r.stderr
