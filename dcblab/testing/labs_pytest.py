"""The teaching labs (docs/labs/NN-*.md) as pytest items, through sybil:
one item per console block, run in the session's lab. The steps of one
file share its captures and its state; the baseline is restored before a
file's first block and after its last (the fixture ``course``), not
between its blocks. After a failed block, the file's later blocks are
skipped (they stand on its state). The terminal summary has one line per
lab file."""

from pathlib import Path

import pytest
from sybil import Region, Sybil

from ..core import paths
from .labdoc import (LabRun, failure_text, guest_runner, host_runner,
                     parse)

__all__ = ["pytest_collect_file", "course", "LABS_DIR", "SYBIL",
           "pytest_terminal_summary", "pytest_runtest_logreport"]

LABS_DIR = paths.ROOT / "docs" / "labs"
_results = {}   # lab file -> {"passed": n, "failed": n, "skipped": n, "s": t, "first": line}


def _parser(document):
    """sybil parser: a Region per console block that has commands."""
    path = Path(document.path)
    text = document.text
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    for block in parse(text, path):
        last = block.steps[-1].line + len(block.steps[-1].expected) + 1
        end = starts[min(last, len(starts) - 1)]
        yield Region(starts[block.line - 1], end, block, _evaluate)


def _evaluate(example):
    ns = example.namespace
    block = example.parsed
    if ns.get("_labdoc_failed"):
        pytest.skip(f"an earlier step of this lab failed (line "
                    f"{ns['_labdoc_failed']})")
    run = ns.get("_labdoc_run")
    if run is None:
        handle = ns["course"]
        run = ns["_labdoc_run"] = LabRun(
            handle.guests,
            guest_runner(lambda host, argv, timeout: handle.guest(host).run(
                argv, check=False, timeout=timeout)),
            host_runner(handle.name))
    for step in block.steps:
        command = run.command(block, step)
        outcome = run.run(block, step, command)
        if not outcome.ok:
            ns["_labdoc_failed"] = step.line
            return failure_text(block, step, outcome, command)
    return None


SYBIL = Sybil(parsers=[_parser], path=str(LABS_DIR),
               patterns=["[0-9][0-9]-*.md"], fixtures=["course"])
pytest_collect_file = SYBIL.pytest()


@pytest.fixture(scope="module")
def course(lab):
    """The session's lab for one lab file: at the baseline when its first
    block runs, restored after its last."""
    lab.restore()
    yield lab
    lab.restore()


def pytest_runtest_logreport(report):
    path, _, _ = report.location
    if not path.endswith(".md") or report.when == "teardown" and \
            report.passed:
        return
    r = _results.setdefault(path, {"passed": 0, "failed": 0, "skipped": 0,
                                   "s": 0.0, "first": None})
    if report.when == "call" or report.failed or report.skipped:
        outcome = report.outcome
        r[outcome] += 1
        if report.failed and r["first"] is None:
            r["first"] = report.location[1]
    r["s"] += report.duration


def pytest_terminal_summary(terminalreporter):
    if not _results:
        return
    tr = terminalreporter
    tr.write_sep("-", "dcblab teaching labs")
    for path, r in sorted(_results.items()):
        blocks = r["passed"] + r["failed"] + r["skipped"]
        if r["failed"]:
            state = f"FAILED at line {r['first']}"
            if r["skipped"]:
                state += f" ({r['skipped']} later blocks not run)"
        else:
            state = "passed"
        tr.write_line(f"{path:44s} {state:10s} {blocks:2d} blocks "
                      f"{r['s']:6.1f} s")
