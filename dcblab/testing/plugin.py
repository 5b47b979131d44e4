"""pytest integration: guests as fixtures, splats fail tests, artefacts.

Fixtures
  lab     session-scoped lab from topology/two-hosts.toml (a LabHandle:
          hosts as attributes, lab.h1.run([...])); the baseline is
          restored after every test that used it
  fabric  session-scoped lab from topology/dcb-fabric.toml (three hosts,
          a switch); the tests that use it run after all the others
  guest   the lab's h1, for single-guest tests
  undo    per-test LIFO stack of cleanups, run after the test on every path

Hooks
  * a kernel splat on any running guest's console during a test fails that
    test, quoting the splat (also during fixture set-up, i.e. boot);
  * on a kernel flavour with kmemleak (FLAVOUR=debug), the last test of
    each file (test module, teaching lab) whose tests used a lab ends with
    a kmemleak scan in each running guest, and each lab with two before it
    goes down; a report fails that test (or the lab's last one);
  * a failed test that used the lab gets the guests' evidence (see
    dcblab.testing.evidence) in its report, short, and whole in its
    artefact folder BUILD/artefacts/<test id>/ with the consoles, QEMU
    logs and its guest commands with their output; the report names it;
  * a lab that fails to start (a guest that does not boot, a baseline
    that fails) fails the set-up of the first test that needs it, whose
    artefact folder gets the lab's consoles, QEMU logs and keeper log as
    they were when it failed; the later tests' reports name that folder.

Options
  --keep-lab-on-failure  if a test failed, the session's lab stays up at
                         the end (`dcblab down --name pytest-PID` stops it);
                         with -x, in the state the failed test left
  --dcblab-artefacts DIR artefact folders under DIR (default: BUILD/artefacts
                         for this repository's tests, else dcblab-artefacts/
                         in the session's rootdir, beside the tests)
  --dcblab-backend NAME  how the labs run their guests (qemu, libvirt)
"""

import concurrent.futures
import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..core import paths
from .. import backends
from ..core.errors import DcblabError
from ..core.flavours import flavour
from ..lab import Lab, reap
from ..topology import load
from . import evidence
from .guest import Guest
from .handle import LabHandle
from .kmemleak import MIN_AGE_S, Kmemleak

__all__ = ["lab_on_kernel", "artefact_root"]

_machines = []
_leaks = {}          # guest name -> Kmemleak, on flavours that have it
LABS = ("lab", "fabric")   # the fixtures that are labs
_extra = {}          # test id -> [(name, path)] its artefact() registered
_session = {"config": None, "failed": False}
_saved = {}          # test nodeid -> its artefact folder, this session
_kept = []           # names of labs left up by --keep-lab-on-failure
_start_failed = {}   # fixture name -> _StartFailure of its lab, if it failed
_file_ends = {}      # test nodeid -> is it the last of its scan unit
_lab_used = set()    # scan units whose tests used a lab since their scan


def pytest_addoption(parser):
    group = parser.getgroup("dcblab")
    group.addoption("--keep-lab-on-failure", action="store_true",
                    help="if a test failed, leave the session's lab up at "
                         "the end and say how to attach to it and stop it")
    group.addoption("--dcblab-artefacts", metavar="DIR",
                    help="put failed tests' artefact folders under DIR "
                         "(default: BUILD/artefacts for dcblab's own tests, "
                         "else dcblab-artefacts/ in the rootdir)")
    group.addoption("--dcblab-backend", choices=backends.names(),
                    help="how the session's labs run their guests (default: "
                         "DCBLAB_BACKEND, else qemu)")


def backend_name(config=None):
    """The session's backend: --dcblab-backend, else DCBLAB_BACKEND, else
    qemu."""
    config = config or _session["config"]
    chosen = config.getoption("dcblab_backend") if config else None
    return chosen or backends.default_name()


def pytest_configure(config):
    _session["config"] = config
    # A bad FLAVOUR is the user's mistake: one line, not an INTERNALERROR.
    try:
        flavour()
        # Labs the tests start themselves (`dcblab up` in a subprocess)
        # use the session's backend too.
        os.environ["DCBLAB_BACKEND"] = backend_name(config)
    except DcblabError as e:
        pytest.exit(f"dcblab: {e}", returncode=2)


def pytest_report_header(config):
    f = flavour()
    return [f"dcblab: kernel flavour {f.name} ({paths.boot_kernel(f.name)}), "
            f"kmemleak scans {'on' if f.kmemleak else 'off'}, "
            f"{backend_name(config)} backend"]


@dataclass
class _StartFailure:
    """A lab fixture whose lab failed to start: why, and its logs."""
    lab: str
    error: str
    logs: dict               # path in the run directory -> bytes
    folder: Path = None      # the artefact folder, once written


def _lab_up(topology, name, fixture, prefix="", kernel=None,
            flavour_name=None):
    """A lab up for the session's tests: console watched, kmemleak (debug
    flavour) scanned after boot and after each test; down at the end
    unless kept (--keep-lab-on-failure). If it fails to start, its logs
    are kept for the failed set-up's report (_start_failed). With kernel
    (a bzImage), its guests boot that kernel instead of the flavour's:
    cold, since the topology's snapshot slot holds the flavour's kernel,
    and each guest is checked to run that build; flavour_name (default:
    the session's) is the flavour that kernel was built as."""
    try:
        paths.check_images()
    except paths.MissingImages as e:
        pytest.exit(str(e), returncode=2)
    # Leftovers of runs whose owner died (a killed pytest): by run id only.
    reap(say=lambda msg: None)
    _start_failed.pop(fixture, None)
    the_lab = Lab(load(topology), name=name, backend=backend_name(),
                  flavour_name=flavour_name)
    leaks = []
    logs = evidence.RunLogs(the_lab.dir)
    try:
        try:
            with logs, paths.kernel_env(kernel):
                the_lab.up(owner_pid=os.getpid(), cold=kernel is not None)
            _machines.extend(the_lab.machines.values())
            handle = LabHandle(the_lab)
            wrong = handle.not_running(kernel) if kernel else {}
            if wrong:
                host, running = next(iter(wrong.items()))
                raise DcblabError(f"{host} runs {running!r}, not {kernel}")
            if the_lab.flavour.kmemleak:
                for host, g in handle.guests.items():
                    leaks.append(prefix + host)
                    _leaks[prefix + host] = Kmemleak(g)
                boot = _leak_report()
                if boot:
                    pytest.fail(f"kmemleak reports leaks from boot:\n{boot}")
        except (Exception, pytest.fail.Exception) as e:
            _start_failed[fixture] = _StartFailure(the_lab.name, str(e),
                                                   logs.read())
            raise
        finally:
            logs.close()
        yield handle
        last = _last_leak_report(leaks)
        if last:
            pytest.fail(f"kmemleak reports leaks at the end of lab "
                        f"{the_lab.name}:\n{last}")
    finally:
        for key in leaks:
            _leaks.pop(key, None)
        if _keep_lab():
            the_lab.disown()
            _kept.append(the_lab.name)
        else:
            the_lab.down()


def lab_on_kernel(bzimage, name, topology=None, flavour_name=None):
    """For a fixture of a test module: a lab of topology (default: the
    default topology's) whose guests boot bzImage, a kernel built
    elsewhere (e.g. dcblab.build.variants' series without one patch),
    watched and reported on like the session's labs; a LabHandle, down
    when the fixture ends. ``yield from lab_on_kernel(...)``.
    flavour_name: the flavour bzImage was built as (its guests' memory,
    kmemleak scans), default the session's."""
    yield from _lab_up(topology or paths.default_topology(), name, name,
                       prefix=f"{name}:", kernel=bzimage,
                       flavour_name=flavour_name)


@pytest.fixture(scope="session")
def lab():
    """The default topology's lab (two-hosts), up for the whole session."""
    yield from _lab_up(paths.default_topology(), f"pytest-{os.getpid()}",
                       "lab")


@pytest.fixture(scope="session")
def fabric():
    """topology/dcb-fabric.toml (three hosts, a switch), up once for all
    the tests that use it, which run last (pytest_collection_modifyitems):
    its four guests are not kept running under the other tests."""
    yield from _lab_up(paths.ROOT / "topology" / "dcb-fabric.toml",
                       f"fab-{os.getpid()}", "fabric", prefix="fabric:")


@pytest.fixture
def artefact(request):
    """artefact(name, path): if the test fails, PATH is copied into its
    artefact folder as NAME (a result file, a plot)."""
    files = _extra.setdefault(request.node.nodeid, [])

    def add(name, path):
        files.append((name, Path(path)))
    return add


@pytest.fixture
def guest(lab):
    return lab.h1


@pytest.fixture(autouse=True)
def _baseline(request):
    yield
    # A failure that ends the session (-x) with --keep-lab-on-failure:
    # the kept lab shows the failed test's own state, not the baseline.
    if _keep_lab() and request.session.shouldfail:
        return
    # A teaching lab's blocks build on each other: its fixture (course,
    # labs_pytest) restores before the first block and after the last.
    if "course" in request.fixturenames:
        return
    for name in LABS:
        if name in request.fixturenames:
            request.getfixturevalue(name).restore()


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


def _last_leak_report(keys):
    """What the last tests before a lab goes leaked: the scan after a test
    is only the first that sees its objects (kmemleak reports one at the
    second scan that finds it unreferenced and unchanged, and only once
    it is MIN_AGE_S old). So: wait out the age, and scan twice."""
    if not keys:
        return ""
    time.sleep(MIN_AGE_S + 1)
    return "\n\n".join(t for t in (_leak_report(keys), _leak_report(keys))
                       if t)


def _leak_report(keys=None):
    # A scan walks all of a guest's memory: the guests scan in parallel.
    live = {name: k for name, k in _leaks.items() if k.guest.alive()
            and (keys is None or name in keys)}
    with concurrent.futures.ThreadPoolExecutor() as pool:
        texts = dict(zip(live, pool.map(lambda k: k.scan(), live.values())))
    return "\n\n".join(f"kmemleak on {name}:\n{text}"
                       for name, text in texts.items() if text)


def _fixturenames(item):
    """The fixtures an item uses. A teaching lab's block (a sybil item,
    not a pytest Function) has no ``fixturenames``: its closure, which
    holds ``lab`` through ``course``, so splats, failure reports and the
    kmemleak scan work on its blocks as on tests. An item of neither kind
    (pytest's own doctests, say) uses none."""
    names = getattr(item, "fixturenames", None)
    if names is None:
        info = getattr(item, "_fixtureinfo", None)
        names = info.names_closure if info else ()
    return names


def _keep_lab():
    config = _session["config"]
    return bool(config and config.getoption("keep_lab_on_failure")
                and _session["failed"])


def pytest_collection_modifyitems(items):
    """The tests that use the fabric run after all the others, in their
    order: its lab boots once for all of them (17-25 s under TCG here; it
    booted once per test file before, three times a suite)."""
    items.sort(key=lambda item: "fabric" in _fixturenames(item))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    """Notes whether item ends its scan unit (its file, or its directory
    of teaching labs): the kmemleak scan (debug flavour) comes once per
    unit, after its last test. A scan walks each guest's
    memory, ~4.5 s under TCG: one after each of the debug pass's ~100
    tests and 84 teaching lab blocks cost ~13 min of it. A leak is still
    caught, in its file's last test (the report names the file), or at
    the latest in the two scans before its lab goes down."""
    _file_ends[item.nodeid] = nextitem is None or \
        _scan_unit(nextitem) != _scan_unit(item)


def _scan_unit(item):
    """What one kmemleak scan covers: a test file, or a directory of
    teaching labs (markdown; each lab restores its guests before its first
    block and after its last, and a scan after each of the eleven cost
    ~50 s of the debug pass)."""
    return item.path.parent if item.path.suffix == ".md" else item.path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    problems = _splat_report()
    if call.when == "teardown" and _leaks:
        unit = _scan_unit(item)
        if any(name in _fixturenames(item) for name in LABS):
            _lab_used.add(unit)
        if _file_ends.pop(item.nodeid, True) and unit in _lab_used:
            _lab_used.discard(unit)
            leaks = _leak_report()
            if leaks:
                leaks = (f"kmemleak after the last test of {unit.name} "
                         f"(one scan per file or lab directory: the leak "
                         f"may come from any of its tests, or an earlier "
                         f"one's last):\n{leaks}")
            problems = "\n\n".join(p for p in (problems, leaks) if p)
    if problems and not report.failed:
        report.outcome = "failed"
        report.longrepr = problems
    elif problems:
        report.sections.append(("kernel splats", problems))
    if report.failed:
        _session["failed"] = True
        guests = _guests(item)
        start = _start_failure(item, report) if not guests else None
        try:
            if guests:
                _report_failure(item, report, guests)
            elif start:
                _report_start_failure(item, report, start)
        except Exception as e:  # the report must not hide the failure
            report.sections.append(("dcblab evidence",
                                    f"not gathered: {e!r}"))
    if call.when == "teardown":
        for g in _guests(item):
            g.history.clear()


def _report_failure(item, report, guests):
    """The evidence sections, and the artefact folder they name."""
    t0 = time.monotonic()
    found = evidence.gather(guests)
    took = time.monotonic() - t0
    history = sorted((c for g in guests for c in g.history),
                     key=lambda c: c.at)
    report.sections.extend(evidence.sections(found, history))
    for g in guests:
        report.sections.append((f"console {g.name} (tail)",
                                g.machine.console.tail(60)))
    folder = _folder(item, report)
    labs = {id(h.lab): h.lab for h in _handles(item)}.values()
    written = evidence.save(folder, guests, found, history,
                            [(f"{lab.name}-keeper.log", lab.dir / "keeper.log")
                             for lab in labs] + _extra.get(item.nodeid, []))
    report.sections.append((
        "artefacts", f"{folder}/ (evidence gathered in {took:.2f} s)\n"
        + _tree(["report.txt", *written])))
    (folder / "report.txt").write_text(_report_text(report))


def _start_failure(item, report):
    """The _StartFailure of a lab whose start failed this item's set-up,
    or None."""
    if report.when != "setup":
        return None
    for name in LABS:
        failed = _start_failed.get(name)
        if failed and name in _fixturenames(item) and \
                failed.error.splitlines()[0] in report.longreprtext:
            return failed
    return None


def _report_start_failure(item, report, failed):
    """A lab that failed to start: its logs as it left them, in the
    artefact folder of the first test it failed; later ones name it."""
    if failed.folder is not None:
        report.sections.append((
            "artefacts", f"{failed.folder}/ (lab {failed.lab} failed to "
            "start: its logs are with the first test that needed it)"))
        return
    folder = _folder(item, report)
    written, consoles = evidence.save_logs(folder, failed.lab, failed.logs)
    for guest, text in consoles.items():
        report.sections.append((f"console {guest} (tail)",
                                "\n".join(text.splitlines()[-60:])))
    report.sections.append((
        "artefacts", f"{folder}/ (lab {failed.lab} failed to start: its "
        "logs as they were then)\n" + _tree(["report.txt", *written])))
    (folder / "report.txt").write_text(_report_text(report))
    failed.folder = folder


def artefact_root(config):
    """Where failed tests' artefact folders go: --dcblab-artefacts; else,
    for this repository's own tests, BUILD/artefacts; else (a user's
    tests elsewhere) dcblab-artefacts/ in the session's rootdir, beside
    the tests, never in the checkout."""
    given = config.getoption("dcblab_artefacts")
    if given:
        return Path(given)
    rootdir = Path(config.rootpath).resolve()
    if rootdir == paths.ROOT.resolve():
        return paths.build_dir() / "artefacts"
    return rootdir / "dcblab-artefacts"


def _folder(item, report):
    """The test's artefact folder. Its first failure in this session
    replaces what a former run left there; a later one (a teardown after
    a failed call) goes into a sub-folder named after its phase."""
    folder = evidence.artefact_dir(artefact_root(_session["config"]),
                                   item.nodeid)
    if item.nodeid in _saved:
        folder = folder / report.when
    else:
        _saved[item.nodeid] = folder
    shutil.rmtree(folder, ignore_errors=True)
    return folder


def _tree(written):
    top = [w for w in written if "/" not in w]
    subs = {}
    for w in written:
        if "/" in w:
            d, _, f = w.partition("/")
            subs.setdefault(d, []).append(f)
    return "\n".join([" ".join(top)] +
                     [f"{d}/ {' '.join(fs)}" for d, fs in subs.items()])


def _report_text(report):
    parts = [f"{report.nodeid} ({report.when}) failed", "",
             report.longreprtext]
    for title, text in report.sections:
        parts += ["", f"----- {title} -----", text]
    return "\n".join(parts) + "\n"


# Seconds per test file (set-up, call and tear-down of its tests, a
# session lab's bring-up in the first test that asks for it), written at
# the end of the session to paths.suite_times() for make bench.
_file_seconds = {}


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    _file_seconds[path] = _file_seconds.get(path, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    # Only a session of the repository's own tests: the suite runs inner
    # pytest sessions of its own (tests/test_host_untouched.py, ...).
    if not any(f.startswith(("tests/", "docs/")) for f in _file_seconds):
        return
    try:
        paths.build_dir().mkdir(parents=True, exist_ok=True)
        paths.suite_times().write_text(json.dumps(
            {"exit": int(exitstatus), "files": _file_seconds}, indent=1))
    except OSError:
        pass


def pytest_terminal_summary(terminalreporter):
    tr = terminalreporter
    if _saved:
        tr.write_sep("-", "dcblab artefacts of failed tests")
        for nodeid, folder in _saved.items():
            tr.write_line(f"{nodeid}: {folder}/")
    for name in _kept:
        tr.write_line(f"lab {name} kept up: `bin/dcblab status --name "
                      f"{name}`, `bin/dcblab shell --name {name} h2`, "
                      f"`bin/dcblab down --name {name}`")


def _handles(item):
    return [v for v in getattr(item, "funcargs", {}).values()
            if isinstance(v, LabHandle)]


def _guests(item):
    found = []
    for v in getattr(item, "funcargs", {}).values():
        if isinstance(v, Guest):
            found.append(v)
        elif isinstance(v, LabHandle):
            found.extend(v.guests.values())
    return list({id(g): g for g in found}.values())
