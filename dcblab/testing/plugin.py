"""pytest integration: guests as fixtures, splats fail tests, artefacts.

Fixtures
  lab     session-scoped lab from topology/two-hosts.toml (a LabHandle:
          hosts as attributes, lab.h1.run([...])); the baseline is
          restored after every test that used it
  guest   the lab's h1, for single-guest tests
  undo    per-test LIFO stack of cleanups, run after the test on every path

Hooks
  * a kernel splat on any running guest's console during a test fails that
    test, quoting the splat (also during fixture set-up, i.e. boot);
  * on a kernel flavour with kmemleak (FLAVOUR=debug), every test that used
    the lab ends with a kmemleak scan in each guest; a report fails it;
  * a failed test's report carries each guest's console tail, the guest
    commands the test ran and `tc -s qdisc` of each guest.
"""

import concurrent.futures
import contextlib
import os

import pytest

from ..core import paths
from ..core.errors import DcblabError
from ..core.flavours import flavour
from ..lab import Lab, reap
from ..topology import load
from .guest import Guest
from .handle import LabHandle
from .kmemleak import Kmemleak

__all__ = []

_machines = []
_leaks = {}          # guest name -> Kmemleak, on flavours that have it


def pytest_configure(config):
    # A bad FLAVOUR is the user's mistake: one line, not an INTERNALERROR.
    try:
        flavour()
    except DcblabError as e:
        pytest.exit(f"dcblab: {e}", returncode=2)


def pytest_report_header(config):
    f = flavour()
    return [f"dcblab: kernel flavour {f.name} ({paths.bzimage(f.name)}), "
            f"kmemleak scans {'on' if f.kmemleak else 'off'}"]


@pytest.fixture(scope="session")
def lab():
    try:
        paths.check_images()
    except paths.MissingImages as e:
        pytest.exit(str(e), returncode=2)
    # Leftovers of runs whose owner died (a killed pytest): by run id only.
    reap(say=lambda msg: None)
    the_lab = Lab(load(paths.default_topology()), name=f"pytest-{os.getpid()}")
    try:
        the_lab.up(owner_pid=os.getpid())
        _machines.extend(the_lab.machines.values())
        handle = LabHandle(the_lab)
        if the_lab.flavour.kmemleak:
            for name, g in handle.guests.items():
                _leaks[name] = Kmemleak(g)
            boot = _leak_report()
            if boot:
                pytest.fail(f"kmemleak reports leaks from boot:\n{boot}")
        yield handle
    finally:
        _leaks.clear()
        the_lab.down()


@pytest.fixture
def guest(lab):
    return lab.h1


@pytest.fixture(autouse=True)
def _baseline(request):
    yield
    if "lab" in request.fixturenames:
        request.getfixturevalue("lab").restore()


@pytest.fixture
def undo():
    """Register cleanups right after the change they revert (LIFO)."""
    with contextlib.ExitStack() as stack:
        yield stack


# --- hooks -----------------------------------------------------------------

def _splat_report():
    lines = []
    for m in _machines:
        for splat in m.console.splats():
            lines.append(f"kernel splat on {m.name}'s console:\n{splat}")
    return "\n\n".join(lines)


def _leak_report():
    # A scan walks all of a guest's memory: the guests scan in parallel.
    live = {name: k for name, k in _leaks.items() if k.guest.alive()}
    with concurrent.futures.ThreadPoolExecutor() as pool:
        texts = dict(zip(live, pool.map(lambda k: k.scan(), live.values())))
    return "\n\n".join(f"kmemleak on {name}:\n{text}"
                       for name, text in texts.items() if text)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    problems = _splat_report()
    if call.when == "teardown" and _leaks and "lab" in item.fixturenames:
        problems = "\n\n".join(p for p in (problems, _leak_report()) if p)
    if problems and not report.failed:
        report.outcome = "failed"
        report.longrepr = problems
    elif problems:
        report.sections.append(("kernel splats", problems))
    if report.failed:
        for m in _machines:
            report.sections.append((f"console {m.name} (tail)",
                                    m.console.tail(60)))
        history = [h for g in _guests(item) for h in g.history]
        if history:
            report.sections.append(("guest commands", "\n".join(history)))
        tc = _tc_state(item)
        if tc:
            report.sections.append(("tc -s qdisc", tc))
    if call.when == "teardown":
        for g in _guests(item):
            g.history.clear()


def _guests(item):
    found = []
    for v in getattr(item, "funcargs", {}).values():
        if isinstance(v, Guest):
            found.append(v)
        elif isinstance(v, LabHandle):
            found.extend(v.guests.values())
    return list({id(g): g for g in found}.values())


def _tc_state(item):
    out = []
    for g in _guests(item):
        if g.alive():
            try:
                res = g.agent.exec(["tc", "-s", "qdisc", "show"], timeout=5)
                out.append(f"--- {g.name} ---\n{res.stdout}{res.stderr}")
            except Exception as e:  # the report must not hide the failure
                out.append(f"--- {g.name}: tc failed: {e}")
    return "\n".join(out)
