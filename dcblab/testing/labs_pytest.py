"""The teaching labs (docs/labs/NN-*.md) as pytest items, through sybil:
one item per console block, run in the session's lab of the topology the
lab names (``<!-- topology: NAME -->``, two-hosts without one): the
``lab`` fixture's or the ``fabric`` one's (dcblab.testing.plugin). The
steps of one file share its captures and its state; the baseline is
restored before a file's first block and after its last (the fixture
``course``), not between its blocks. After a failed block, the file's
later blocks are skipped (they stand on its state). The terminal summary
has one line per lab file."""

from pathlib import Path

import py
import pytest
from sybil import Region, Sybil

from ..core import paths
from .dcb import switch_pfc_back
from .plugin import TOPOLOGY
from .labdoc import (DEFAULT_TOPOLOGY, LabDocError, LabRun, causes,
                     failure_text, guest_runner, host_runner, parse,
                     topology_of)

__all__ = ["pytest_collect_file", "course", "LABS_DIR", "SYBIL",
           "SESSION_LABS", "session_lab", "pytest_configure",
           "pytest_collection_modifyitems"]

LABS_DIR = paths.ROOT / "docs" / "labs"


def _parser(document):
    """sybil parser: a Region per console block that has commands. A
    troubleshooting lab (one with causes) has none here: it runs once per
    cause, planted and fixed, in tests/test_lab_troubleshoot.py, and
    would fail as written without one."""
    path = Path(document.path)
    text = document.text
    if causes(text, path):
        return
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


# The fixture (dcblab.testing.plugin) of each topology a lab may name. A
# lab's blocks request theirs by name, beside ``course``, and carry its
# topology (pytest_collection_modifyitems): the fabric's then run with
# the fabric's tests, after all the others (the plugin orders tests by
# topology), and a fabric lab never boots the two-hosts lab.
SESSION_LABS = {DEFAULT_TOPOLOGY: "lab", "dcb-fabric": "fabric"}


def _sybil(fixture):
    return Sybil(parsers=[_parser], path=str(LABS_DIR),
                 patterns=["[0-9][0-9]-*.md"], fixtures=["course", fixture])


_SYBILS = {fixture: _sybil(fixture) for fixture in SESSION_LABS.values()}
_COLLECTORS = {fixture: s.pytest() for fixture, s in _SYBILS.items()}
SYBIL = _SYBILS[SESSION_LABS[DEFAULT_TOPOLOGY]]  # parses any lab file


def session_lab(path, text):
    """The session fixture a lab file (its path and text) runs on."""
    topology = topology_of(text)
    if topology not in SESSION_LABS:
        raise LabDocError(f"{path}: written for topology {topology}, which "
                          "the suite has no session lab of (it has "
                          f"{', '.join(SESSION_LABS)})")
    return SESSION_LABS[topology]


def _topology_file(path):
    """The topology file a lab file names."""
    return (paths.TOPOLOGY_DIR / f"{topology_of(path.read_text())}.toml") \
        .resolve()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Each block's topology, for the plugin's ordering by topology and
    its labs' lifetimes (a sybil item has no ``fixturenames``)."""
    files = {}
    for item in items:
        path = Path(item.path)
        if path.suffix == ".md" and SYBIL.should_parse(path):
            if path not in files:
                files[path] = _topology_file(path)
            item.stash[TOPOLOGY] = files[path]


def pytest_collect_file(file_path, parent):
    if not SYBIL.should_parse(file_path):
        return None
    collect = _COLLECTORS[session_lab(file_path, file_path.read_text())]
    return collect(py.path.local(str(file_path)), parent)


@pytest.fixture(scope="module")
def course(request, dcblab_labs):
    """The session's lab of the lab file's topology: at the baseline when
    its first block runs, restored after its last (and its switches'
    PFC put back, for a lab that turned it off and failed before it
    turned it on again)."""
    handle = dcblab_labs.get(_topology_file(Path(request.path)))
    handle.restore()
    yield handle
    handle.restore()
    switch_pfc_back(handle)


class _Results:
    """One line per lab file at the end: blocks passed, failed, skipped
    and seconds. A plugin object of the session (pytest_runtest_logreport
    gets no config), so two sessions in one process share nothing."""

    def __init__(self):
        # lab file -> {"passed": n, "failed": n, "skipped": n, "s": t,
        # "first": line of the first failed block}
        self.files = {}

    def pytest_runtest_logreport(self, report):
        path, _, _ = report.location
        if not path.endswith(".md") or report.when == "teardown" and \
                report.passed:
            return
        r = self.files.setdefault(path, {"passed": 0, "failed": 0,
                                         "skipped": 0, "s": 0.0,
                                         "first": None})
        if report.when == "call" or report.failed or report.skipped:
            r[report.outcome] += 1
            if report.failed and r["first"] is None:
                r["first"] = report.location[1]
        r["s"] += report.duration

    def pytest_terminal_summary(self, terminalreporter):
        if not self.files:
            return
        tr = terminalreporter
        tr.write_sep("-", "dcblab teaching labs")
        for path, r in sorted(self.files.items()):
            blocks = r["passed"] + r["failed"] + r["skipped"]
            if r["failed"]:
                state = f"FAILED at line {r['first']}"
                if r["skipped"]:
                    state += f" ({r['skipped']} later blocks not run)"
            else:
                state = "passed"
            tr.write_line(f"{path:44s} {state:10s} {blocks:2d} blocks "
                          f"{r['s']:6.1f} s")


def pytest_configure(config):
    config.pluginmanager.register(_Results(), "dcblab-lab-results")
