"""pytest integration: guests as fixtures, splats fail tests, artefacts.

Fixtures
  guest   session-scoped single VM (the walking skeleton's guest)
  undo    per-test LIFO stack of cleanups, run after the test on every path

Hooks
  * a kernel splat on any running guest's console during a test fails that
    test, quoting the splat (also during fixture set-up, i.e. boot);
  * a failed test's report carries each guest's console tail and the guest
    commands the test ran.
"""

import contextlib
import os
import time

import pytest

from . import paths
from .accel import choose_accel
from .vm import Vm, VmSpec

__all__ = ["Guest", "running_vms"]

_vms = []


def running_vms():
    return [vm for vm in _vms if vm.alive()]


class Guest:
    """A VM as tests use it: run() records each command for the report."""

    def __init__(self, vm: Vm):
        self.vm = vm
        self.name = vm.name
        self.history = []

    def run(self, argv, *, check=True, **kw):
        t0 = time.monotonic()
        try:
            res = self.vm.agent.run(argv, check=check, **kw)
        except Exception as e:
            self.history.append(f"{self.name}$ {_quote(argv)}  -> {e!r:.300}")
            raise
        self.history.append(f"{self.name}$ {_quote(argv)}  -> rc {res.rc} "
                            f"({(time.monotonic() - t0) * 1000:.0f} ms)")
        return res

    def read(self, path):
        return self.vm.agent.read_file(path).decode(errors="replace")

    def write(self, path, data):
        self.history.append(f"{self.name}: write {path!r} <- {data!r:.200}")
        self.vm.agent.write_file(path, data)


def _quote(argv):
    return " ".join(a if a and all(c.isalnum() or c in "-_./=:,@%+" for c in a)
                    else repr(a) for a in argv)


def _need_images():
    missing = [p for p in (paths.bzimage(), paths.initramfs()) if not p.exists()]
    if missing:
        pytest.exit(f"missing {', '.join(map(str, missing))}: run `make kernel "
                    "image` (or `make test`, which builds them)", returncode=2)


def boot_guest(name, rundir, **spec):
    """Boot one VM and wait for its agent; registered for splat checks."""
    _need_images()
    accel = choose_accel(paths.bzimage(), paths.initramfs())
    vm = Vm(VmSpec(name, paths.bzimage(), paths.initramfs(), accel=accel,
                   **spec), rundir)
    _vms.append(vm)
    vm.start()
    try:
        vm.wait_init(timeout=60)
        vm.wait_ready(timeout=60)
    except Exception:
        vm.stop()
        raise
    return vm


def run_dir(tag):
    d = paths.build_dir() / "run" / f"{tag}-{os.getpid()}"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="session")
def guest():
    vm = boot_guest("g1", run_dir("pytest") / "g1")
    try:
        yield Guest(vm)
    finally:
        vm.stop()


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
        guests = [v for v in item.funcargs.values() if isinstance(v, Guest)]
        history = [h for g in guests for h in g.history]
        if history:
            report.sections.append(("guest commands", "\n".join(history)))
    if call.when == "teardown":
        for v in item.funcargs.values():
            if isinstance(v, Guest):
                v.history.clear()

