"""pytest integration: guests as fixtures, splats fail tests, artefacts.

Fixtures
  lab     session-scoped two-VM lab from topology/two-hosts.toml; hosts as
          attributes (lab.h1.run([...])); the baseline is restored after
          every test that used it
  guest   the lab's h1, for single-guest tests
  undo    per-test LIFO stack of cleanups, run after the test on every path

Hooks
  * a kernel splat on any running guest's console during a test fails that
    test, quoting the splat (also during fixture set-up, i.e. boot);
  * a failed test's report carries each guest's console tail and the guest
    commands the test ran.
"""

import concurrent.futures
import contextlib
import os

import pytest

from . import paths
from .guest import Guest
from .lab import Lab, reap
from .topology import load

__all__ = ["LabHandle", "running_vms", "TOPOLOGY"]

TOPOLOGY = paths.ROOT / "topology" / "two-hosts.toml"

_vms = []


def running_vms():
    return [vm for vm in _vms if vm.alive()]


def _need_images():
    missing = paths.missing_images()
    if missing:
        pytest.exit(f"missing {', '.join(missing)}: run `make kernel "
                    "image` (or `make test`, which builds them)", returncode=2)


class LabHandle:
    """The session lab as tests see it: ``lab.h1``, ``lab.topology``..."""

    def __init__(self, lab: Lab):
        self.lab = lab
        self.name = lab.name
        self.topology = lab.topology
        self.wire = lab.wire
        self.guests = {n: Guest(vm) for n, vm in lab.vms.items()}

    def __getattr__(self, name):
        try:
            return self.__dict__["guests"][name]
        except KeyError:
            raise AttributeError(name) from None

    def restore(self):
        """Back to the baseline: see guest-image/restore."""
        def one(host):
            devs = [n.name for n in host.nics] + \
                [n.vlan_dev(v) for n in host.nics for v in n.vlans]
            self.guests[host.name].run(["dcblab-restore", *devs])
        # The guests restore in parallel; the first failure is raised.
        with concurrent.futures.ThreadPoolExecutor() as pool:
            for f in [pool.submit(one, h) for h in self.topology.hosts]:
                f.result()


@pytest.fixture(scope="session")
def lab():
    _need_images()
    # Leftovers of runs whose owner died (a killed pytest): by run id only.
    reap(say=lambda msg: None)
    the_lab = Lab(load(TOPOLOGY), name=f"pytest-{os.getpid()}")
    try:
        the_lab.up(owner_pid=os.getpid())
        _vms.extend(the_lab.vms.values())
        yield LabHandle(the_lab)
    finally:
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
    for vm in _vms:
        for splat in vm.console.splats():
            lines.append(f"kernel splat on {vm.name}'s console:\n{splat}")
    return "\n\n".join(lines)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    splats = _splat_report()
    if splats and not report.failed:
        report.outcome = "failed"
        report.longrepr = splats
    elif splats:
        report.sections.append(("kernel splats", splats))
    if report.failed:
        for vm in _vms:
            report.sections.append((f"console {vm.name} (tail)",
                                    vm.console.tail(60)))
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
    for v in item.funcargs.values():
        if isinstance(v, Guest):
            found.append(v)
        elif isinstance(v, LabHandle):
            found.extend(v.guests.values())
    return list({id(g): g for g in found}.values())


def _tc_state(item):
    out = []
    for g in _guests(item):
        if g.vm.alive():
            try:
                res = g.vm.agent.exec(["tc", "-s", "qdisc", "show"], timeout=5)
                out.append(f"--- {g.name} ---\n{res.stdout}{res.stderr}")
            except Exception as e:  # the report must not hide the failure
                out.append(f"--- {g.name}: tc failed: {e}")
    return "\n".join(out)

