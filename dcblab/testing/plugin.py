"""pytest integration: guests as fixtures, splats fail tests, artefacts.

Fixtures
  lab     the lab of the test's topology: ``@pytest.mark.topology(T)``
          on the test, its class or its module (pytestmark), else
          --dcblab-topology, else topology/two-hosts.toml. A LabHandle:
          hosts and switches as attributes (lab.h1.run([...]), lab.sw).
          One lab per topology for the session, brought up by the first
          test that needs it, restored to its baseline after every test
          that used it, down after the last test that needs it (tests
          are ordered by topology so that each boots once)
  fabric  the lab of topology/dcb-fabric.toml (three hosts, a switch)
  guest   the lab's h1, for single-guest tests
  dcblab_labs  (session) the labs themselves: dcblab_labs.get(T),
          dcblab_labs.for_node(request.node), for fixtures of a wider
          scope than a test's (a module-scoped fixture cannot use lab)
  artefact  artefact(name, path): a file for the failed test's folder
  undo    per-test LIFO stack of cleanups, run after the test on every path

A topology T is a path (relative to the file of the test that names it;
for --dcblab-topology, to the current directory) or the name of one of
dcblab's own (two-hosts, dcb-fabric). A marker naming a file that does
not exist or does not parse is a collection error of its test file.

Hooks
  * a kernel splat on any running guest's console during a test fails that
    test, quoting the splat (also during fixture set-up, i.e. boot);
  * on a kernel flavour with kmemleak (FLAVOUR=debug), the last test of
    each file (test module, teaching lab) whose tests used a lab ends with
    a kmemleak scan in each running guest, and each lab with two before it
    goes down; a report fails that test (or the lab's last one);
  * a failed test that used a lab gets the guests' evidence (see
    dcblab.testing.evidence), and what pytest_dcblab_failure_evidence
    implementations add (dcblab.testing.hookspecs), in its report, short,
    and whole in its artefact folder with the consoles, QEMU logs and its
    guest commands with their output; the report names it, and so does
    the junit XML (property dcblab_artefacts);
  * a lab that fails to start (a guest that does not boot, a baseline
    that fails) fails the set-up of the first test that needs it, whose
    artefact folder gets the lab's consoles, QEMU logs and keeper log as
    they were when it failed; the later tests' reports name that folder;
  * the terminal summary, and the junit XML's testsuite properties, say
    which kernel, flavour and backend ran, and each lab's bring-up time.

Options
  --dcblab-topology T    the lab fixture's topology for tests without a
                         topology marker (default two-hosts); relative to
                         the current directory, else to the rootdir
  --keep-lab-on-failure  if a test failed, the session's labs stay up at
                         the end (`dcblab down --name pytest-PID` stops
                         one); with -x, in the state the failed test left
  --dcblab-artefacts DIR artefact folders under DIR (default: BUILD/artefacts
                         for this repository's tests, else dcblab-artefacts/
                         in the session's rootdir, beside the tests)
  --dcblab-backend NAME  how the labs run their guests (qemu, libvirt)
  --dcblab-kernel BZIMAGE  boot the labs from a kernel built elsewhere
                         (DCBLAB_KERNEL), its embedded config checked first
  --dcblab-patches DIR   (dcblab test) the series plus DIR's patches
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pytest

from ..core import paths
from .. import backends
from ..core.bzimage import bzimage_version
from ..core.errors import DcblabError
from ..core.flavours import flavour
from ..lab import Lab, reap
from ..topology import load
from . import evidence, hookspecs
from .guest import Guest
from .handle import LabHandle
from .kmemleak import MIN_AGE_S, Kmemleak

__all__ = ["Labs", "lab_on_kernel", "artefact_root", "backend_name",
           "resolve_topology", "TOPOLOGY", "FABRIC"]

FABRIC = paths.TOPOLOGY_DIR / "dcb-fabric.toml"
# An item's topology, when something other than its fixtures says it (a
# teaching lab's blocks: dcblab.testing.labs_pytest sets it).
TOPOLOGY = pytest.StashKey[Path]()
_USED = pytest.StashKey[list]()      # the LabHandles an item got


@dataclass
class _StartFailure:
    """A lab whose start failed: why, and its logs."""
    lab: str
    error: str
    logs: dict               # path in the run directory -> bytes
    folder: Path = None      # the artefact folder, once written


@dataclass
class _State:
    """The plugin's state for one pytest session (config.stash)."""
    config: pytest.Config
    failed: bool = False
    current: pytest.Item = None       # the item running now
    machines: list = field(default_factory=list)
    leaks: dict = field(default_factory=dict)   # guest key -> Kmemleak
    extra: dict = field(default_factory=dict)   # nodeid -> [(name, path)]
    saved: dict = field(default_factory=dict)   # nodeid -> artefact folder
    kept: list = field(default_factory=list)    # labs kept up
    start_failed: dict = field(default_factory=dict)  # lab -> _StartFailure
    file_ends: dict = field(default_factory=dict)     # nodeid -> bool
    lab_used: set = field(default_factory=set)  # scan units using a lab
    last_user: dict = field(default_factory=dict)     # topology -> nodeid
    file_seconds: dict = field(default_factory=dict)  # test file -> s
    ups: list = field(default_factory=list)     # (lab, topology, s)
    labs: "Labs" = None


_STATE = pytest.StashKey[_State]()


def _state(config) -> _State:
    return config.stash[_STATE]


def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser):
    group = parser.getgroup("dcblab")
    group.addoption("--dcblab-topology", metavar="TOPOLOGY",
                    help="the lab fixture's topology for tests without a "
                         "topology marker: a .toml path or the name of one "
                         "of dcblab's (default: two-hosts)")
    group.addoption("--dcblab-kernel", metavar="BZIMAGE",
                    help="boot the labs from BZIMAGE, a kernel built "
                         "elsewhere (as DCBLAB_KERNEL=BZIMAGE); its embedded "
                         "config is checked first (docs/own-kernel.md)")
    group.addoption("--dcblab-patches", metavar="DIR",
                    help="with `dcblab test`: build the series plus DIR's "
                         "patches and run on that kernel (docs/own-kernel.md)")
    group.addoption("--keep-lab-on-failure", action="store_true",
                    help="if a test failed, leave the session's labs up at "
                         "the end and say how to attach to them and stop them")
    group.addoption("--dcblab-artefacts", metavar="DIR",
                    help="put failed tests' artefact folders under DIR "
                         "(default: BUILD/artefacts for dcblab's own tests, "
                         "else dcblab-artefacts/ in the rootdir)")
    group.addoption("--dcblab-backend", choices=backends.names(),
                    help="how the session's labs run their guests (default: "
                         "DCBLAB_BACKEND, else qemu)")


def backend_name(config: pytest.Config) -> str:
    """The session's backend: --dcblab-backend, else DCBLAB_BACKEND, else
    qemu."""
    return config.getoption("dcblab_backend") or backends.default_name()


def resolve_topology(name: str | os.PathLike, base: Path) -> Path:
    """The topology file a marker or option names: a path, relative to
    base (.toml may be left out); else the name of one of dcblab's own.
    DcblabError naming both places when it is in neither."""
    given = Path(name).expanduser()
    here = given if given.is_absolute() else base / given
    if given.suffix != ".toml":
        here = here.with_name(f"{here.name}.toml")
    if here.is_file():
        return here.resolve()
    own = paths.TOPOLOGY_DIR / here.name
    if given.parent == Path(".") and own.is_file():
        return own.resolve()
    own = ", ".join(sorted(p.stem for p in paths.TOPOLOGY_DIR.glob("*.toml")))
    raise DcblabError(f"topology {str(name)!r}: no file {here} (nor one of "
                      f"dcblab's own: {own})")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "topology(path_or_name): the topology of the lab fixture "
        "of this test (class, module): a .toml path relative to the test "
        "file, or one of dcblab's (two-hosts, dcb-fabric)")
    state = config.stash[_STATE] = _State(config)
    config.pluginmanager.register(_Times(state), "dcblab-times")
    # A bad FLAVOUR or topology is the user's mistake: one line, not an
    # INTERNALERROR.
    try:
        flavour()
        _own_kernel(config)
        given = config.getoption("dcblab_topology")
        default = _option_topology(config, given) if given \
            else paths.default_topology().resolve()
        load(default)
        state.labs = Labs(state, default)
        # Labs the tests start themselves (`dcblab up` in a subprocess)
        # use the session's backend too.
        os.environ["DCBLAB_BACKEND"] = backend_name(config)
    except DcblabError as e:
        pytest.exit(f"dcblab: {e}", returncode=2)


def _option_topology(config, given):
    """--dcblab-topology's file: relative to the current directory, else
    (an ini file's addopts) to the rootdir."""
    try:
        return resolve_topology(given, config.invocation_params.dir)
    except DcblabError:
        if Path(config.rootpath) == Path(config.invocation_params.dir):
            raise
        return resolve_topology(given, Path(config.rootpath))


def _own_kernel(config):
    """--dcblab-kernel: DCBLAB_KERNEL for the session's labs, checked now
    (its embedded config has every option the labs need) so that a
    kernel that cannot run them stops the run in one line per option."""
    if config.getoption("dcblab_patches"):
        raise DcblabError("--dcblab-patches DIR: run it as `dcblab test "
                          "--dcblab-patches DIR ...`, which builds that "
                          "kernel first (or give --dcblab-kernel a bzImage)")
    given = config.getoption("dcblab_kernel")
    if not given:
        return
    kernel = Path(config.invocation_params.dir, given).resolve()
    if not kernel.is_file():
        raise DcblabError(f"--dcblab-kernel {given}: no such file")
    paths.check_kernel(kernel)
    os.environ[paths.KERNEL_ENV] = str(kernel)


def _kernel_line(config):
    f = flavour()
    kernel = paths.boot_kernel(f.name)
    try:
        version = bzimage_version(kernel).split(" ", 1)[0]
    except OSError:
        version = "not built yet"
    return (f"kernel {kernel} ({version}), flavour {f.name}, kmemleak scans "
            f"{'on' if f.kmemleak else 'off'}, {backend_name(config)} backend")


def pytest_report_header(config):
    return [f"dcblab: {_kernel_line(config)}, default topology "
            f"{_state(config).labs.default.name}"]


class Labs:
    """The session's labs, one per topology file, each brought up on first
    use and kept until down() (after the last test that needs it) or the
    end of the session."""

    def __init__(self, state: _State, default: Path):
        self._state = state
        self.default = default
        self._up = {}      # topology path -> (LabHandle, its generator)
        self._failed = {}  # topology path -> why its lab failed to start
        self._names = {}   # topology path -> lab name

    def name_of(self, topology: Path) -> str:
        """The lab's name (`dcblab status --name NAME`): pytest-PID for
        the default topology, fab-PID for the fabric, else after the
        topology's name (its first 8 characters)."""
        topology = Path(topology).resolve()
        if topology not in self._names:
            pid = os.getpid()
            if topology == self.default:
                stem = "pytest"
            elif topology == FABRIC.resolve():
                stem = "fab"
            else:
                stem = re.sub(r"[^a-z0-9-]", "-",
                              _loaded(topology).name.lower())
                stem = stem.strip("-")[:8].strip("-") or "lab"
            name = f"{stem}-{pid}"
            taken = set(self._names.values())
            n = 2
            while name in taken:
                name = f"{stem[:6]}{n}-{pid}"
                n += 1
            self._names[topology] = name
        return self._names[topology]

    def get(self, topology: str | os.PathLike) -> LabHandle:
        """The lab of topology (a path, or one of dcblab's by name), up."""
        path = resolve_topology(topology, Path.cwd())
        if path in self._failed:
            # Once per session: a lab that did not start fails the later
            # tests that need it at once (their reports name the first's
            # artefact folder), as a session fixture's error would.
            raise self._failed[path]
        if path not in self._up:
            name = self.name_of(path)
            prefix = "" if path == self.default else f"{name}:"
            gen = _lab_up(self._state, path, name, prefix=prefix)
            try:
                self._up[path] = (next(gen), gen)
            except (Exception, pytest.fail.Exception) as e:
                self._failed[path] = e
                raise
        handle = self._up[path][0]
        item = self._state.current
        if item is not None:
            used = item.stash.setdefault(_USED, [])
            if handle not in used:
                used.append(handle)
        return handle

    def for_node(self, node: pytest.Item | pytest.Collector) -> LabHandle:
        """The lab of a test, class or module: its topology marker, else
        the session's default."""
        return self.get(topology_of(node, self.default))

    def owns(self, handle: LabHandle) -> bool:
        return any(h is handle for h, _ in self._up.values())

    def is_up(self, topology: Path) -> bool:
        return topology in self._up

    def down(self, topology: Path) -> None:
        """Bring topology's lab down (kept up by --keep-lab-on-failure
        after a failure); a kmemleak report of its last scans raises."""
        _, gen = self._up.pop(topology)
        for _ in gen:
            pass

    def last_scans(self) -> None:
        """The last kmemleak scans of every lab up (debug flavour), the
        labs left up; the first report raises, after all were made."""
        errors = []
        for topology in list(self._up):
            try:
                next(self._up[topology][1], None)
            except (Exception, pytest.fail.Exception) as e:
                self._up.pop(topology)    # its generator ended: it is down
                errors.append(e)
        if errors:
            raise errors[0]

    def close(self) -> list:
        """All labs down, the last one up first; every one is tried. The
        errors, as lines."""
        errors = []
        for topology in reversed(list(self._up)):
            try:
                self.down(topology)
            except (Exception, pytest.fail.Exception) as e:
                errors.append(f"lab of {topology}: {e}")
        return errors


def topology_of(node, default: Path) -> Path:
    """A node's topology: a TOPOLOGY stash entry (teaching labs), else its
    closest topology marker (resolved from its file's directory), else
    default."""
    if TOPOLOGY in node.stash:
        return node.stash[TOPOLOGY]
    marker = node.get_closest_marker("topology")
    if marker is None:
        return default
    if len(marker.args) != 1 or marker.kwargs:
        raise DcblabError("@pytest.mark.topology takes one argument, a "
                          f"topology's path or name (got {marker})")
    path = resolve_topology(marker.args[0], Path(node.path).parent)
    _loaded(path)
    return path


@functools.lru_cache(maxsize=None)
def _loaded(path):
    """load(path), once per file a session's markers name."""
    return load(path)


def _lab_up(state, topology, name, prefix="", kernel=None,
            flavour_name=None):
    """A generator: a lab up for the session's tests, yielded; console
    watched, kmemleak (debug flavour) scanned after boot and after each
    test. Resumed, it makes the last scans before the lab goes down (a
    report raises pytest.fail) and yields again; resumed again, the lab
    goes down, unless kept (--keep-lab-on-failure). If it
    fails to start, its logs are kept for the failed set-up's report
    (state.start_failed). With kernel (a bzImage), its guests boot that
    kernel instead of the flavour's (from a snapshot slot of that
    kernel's: dcblab.lab.snapshots), and each guest is checked to run
    that build; flavour_name (default: the session's) is the flavour that
    kernel was built as."""
    try:
        paths.check_images()
    except paths.MissingImages as e:
        pytest.exit(str(e), returncode=2)
    # Leftovers of runs whose owner died (a killed pytest): by run id only.
    reap(say=lambda msg: None)
    state.start_failed.pop(name, None)
    the_lab = Lab(load(topology), name=name,
                  backend=backend_name(state.config),
                  flavour_name=flavour_name)
    leaks = []
    logs = evidence.RunLogs(the_lab.dir)
    try:
        try:
            t0 = time.monotonic()
            with logs, paths.kernel_env(kernel):
                the_lab.up(owner_pid=os.getpid())
            state.ups.append((name, topology, time.monotonic() - t0))
            state.machines.extend(the_lab.machines.values())
            handle = LabHandle(the_lab)
            wrong = handle.not_running(kernel) if kernel else {}
            if wrong:
                host, running = next(iter(wrong.items()))
                raise DcblabError(f"{host} runs {running!r}, not {kernel}")
            if the_lab.flavour.kmemleak:
                for host, g in handle.guests.items():
                    leaks.append(prefix + host)
                    state.leaks[prefix + host] = Kmemleak(g)
                boot = _leak_report(state)
                if boot:
                    pytest.fail(f"kmemleak reports leaks from boot:\n{boot}")
        except (Exception, pytest.fail.Exception) as e:
            state.start_failed[name] = _StartFailure(the_lab.name, str(e),
                                                     logs.read())
            raise
        finally:
            logs.close()
        yield handle
        last = _last_leak_report(state, leaks)
        if last:
            pytest.fail(f"kmemleak reports leaks at the end of lab "
                        f"{the_lab.name}:\n{last}")
        yield None
    finally:
        for key in leaks:
            state.leaks.pop(key, None)
        if _keep_lab(state):
            the_lab.disown()
            state.kept.append(the_lab.name)
        else:
            the_lab.down()


def lab_on_kernel(request: pytest.FixtureRequest, bzimage: Path, name: str,
                  topology: Path | None = None,
                  flavour_name: str | None = None) -> Iterator[LabHandle]:
    """For a fixture of a test module: a lab of topology (default: the
    session's default) whose guests boot bzImage, a kernel built
    elsewhere (e.g. dcblab.build.variants' series without one patch),
    watched and reported on like the session's labs; a LabHandle, down
    when the fixture ends. ``yield from lab_on_kernel(request, ...)``.
    flavour_name: the flavour bzImage was built as (its guests' memory,
    kmemleak scans), default the session's. It is not restored between
    tests."""
    state = _state(request.config)
    gen = _lab_up(state, topology or state.labs.default, name,
                  prefix=f"{name}:", kernel=bzimage, flavour_name=flavour_name)
    yield next(gen)
    for _ in gen:       # the last scans, then down
        pass


@pytest.fixture(scope="session")
def dcblab_labs(request) -> Iterator[Labs]:
    """The session's labs (see Labs). At the end of the last test, their
    last kmemleak scans (a report fails it); they go down at the end of
    the session, after its reports (the last test's teardown report
    still finds its guests up)."""
    labs = _state(request.config).labs
    yield labs
    labs.last_scans()


@pytest.fixture
def lab(request, dcblab_labs) -> LabHandle:
    """The lab of the test's topology (marker, --dcblab-topology, or
    two-hosts)."""
    return dcblab_labs.for_node(request.node)


@pytest.fixture
def fabric(dcblab_labs) -> LabHandle:
    """topology/dcb-fabric.toml's lab (three hosts, a switch)."""
    return dcblab_labs.get(FABRIC)


@pytest.fixture
def artefact(request) -> Callable[[str, os.PathLike], None]:
    """artefact(name, path): if the test fails, PATH is copied into its
    artefact folder as NAME (a result file, a plot)."""
    files = _state(request.config).extra.setdefault(request.node.nodeid, [])

    def add(name, path):
        files.append((name, Path(path)))
    return add


@pytest.fixture
def guest(lab) -> Guest:
    return lab.h1


@pytest.fixture(autouse=True)
def _baseline(request):
    yield
    state = _state(request.config)
    # A failure that ends the session (-x) with --keep-lab-on-failure:
    # the kept lab shows the failed test's own state, not the baseline.
    if _keep_lab(state) and request.session.shouldfail:
        return
    # A teaching lab's blocks build on each other: its fixture (course,
    # labs_pytest) restores before the first block and after the last.
    if "course" in request.fixturenames:
        return
    for handle in _handles(request.node):
        if state.labs.owns(handle):
            handle.restore()


@pytest.fixture
def undo():
    """Register cleanups right after the change they revert (LIFO)."""
    with contextlib.ExitStack() as stack:
        yield stack


# --- hooks -----------------------------------------------------------------

def _splat_report(state):
    lines = []
    for m in state.machines:
        for splat in m.console.splats():
            lines.append(f"kernel splat on {m.name}'s console:\n{splat}")
    return "\n\n".join(lines)


def _last_leak_report(state, keys):
    """What the last tests before a lab goes leaked: the scan after a test
    is only the first that sees its objects (kmemleak reports one at the
    second scan that finds it unreferenced and unchanged, and only once
    it is MIN_AGE_S old). So: wait out the age, and scan twice."""
    if not keys:
        return ""
    time.sleep(MIN_AGE_S + 1)
    return "\n\n".join(t for t in (_leak_report(state, keys),
                                   _leak_report(state, keys)) if t)


def _leak_report(state, keys=None):
    # A scan walks all of a guest's memory: the guests scan in parallel.
    live = {name: k for name, k in state.leaks.items() if k.guest.alive()
            and (keys is None or name in keys)}
    with concurrent.futures.ThreadPoolExecutor() as pool:
        texts = dict(zip(live, pool.map(lambda k: k.scan(), live.values())))
    return "\n\n".join(f"kmemleak on {name}:\n{text}"
                       for name, text in texts.items() if text)


def _keep_lab(state):
    return bool(state.config.getoption("keep_lab_on_failure")
                and state.failed)


def _item_topologies(item, labs):
    """The session labs' topologies an item needs, from its fixtures (lab,
    guest, fabric) or its TOPOLOGY stash entry; an item of no known kind
    (pytest's own doctests, say) needs none. A module that defines a
    fabric fixture of its own (test_fabric_split.py: the fabric split
    across two machines) needs its topology marker's lab, not the
    session's dcb-fabric: counted as a user of that, it would keep the
    four guests of dcb-fabric up, idle but ticking, beside its own
    measurements."""
    if TOPOLOGY in item.stash:
        return [item.stash[TOPOLOGY]]
    names = getattr(item, "fixturenames", ())
    found = []
    if "lab" in names:
        found.append(topology_of(item, labs.default))
    if "fabric" in names:
        if _own_fixture(item, "fabric"):
            found.append(FABRIC.resolve())
        elif item.get_closest_marker("topology") is not None:
            found.append(topology_of(item, labs.default))
    return found


def _own_fixture(item, name):
    """Whether the fixture name that item gets is this plugin's (not a
    module's or conftest's of the same name)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.get(name) if info else None
    return not defs or getattr(defs[-1].func, "__module__", None) == __name__


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A topology marker that names no file, or a file that does not parse,
    is an error collecting the test file, in one line naming the file and
    the key (not an error of each test at its set-up)."""
    outcome = yield
    report = outcome.get_result()
    if not report.passed or not isinstance(report.result, list):
        return
    default = _state(collector.config).labs.default
    for node in report.result:
        if isinstance(node, pytest.Item):
            try:
                topology_of(node, default)
            except DcblabError as e:
                report.outcome = "failed"
                report.longrepr = f"{node.nodeid}: {e}"
                return


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Tests run grouped by topology: first those of the default one (and
    those using no lab), then each other topology's in the order its first
    test was collected, each group in its own order. So each lab boots
    once, and goes down after its last test (pytest_runtest_teardown):
    the fabric's four guests do not idle under the two-hosts tests."""
    state = _state(config)
    labs = state.labs
    rank = {labs.default: 0}
    keys = {}
    for item in items:
        tops = _item_topologies(item, labs)
        for t in tops:
            rank.setdefault(t, len(rank))
        keys[item.nodeid] = max((rank[t] for t in tops), default=0)
    items.sort(key=lambda item: keys[item.nodeid])
    state.last_user = {}
    for item in items:
        for t in _item_topologies(item, labs):
            state.last_user[t] = item.nodeid


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _state(item.config).current = item


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Notes whether item ends its scan unit (its file, or its directory
    of teaching labs): the kmemleak scan (debug flavour) comes once per
    unit, after its last test. A scan walks each guest's
    memory, ~4.5 s under TCG: one after each of the debug pass's ~100
    tests and 84 teaching lab blocks cost ~13 min of it. A leak is still
    caught, in its file's last test (the report names the file), or at
    the latest in the two scans before its lab goes down.
    After the item's own teardown, the labs whose last test it was go
    down (at the end of the session, dcblab_labs takes them down)."""
    state = _state(item.config)
    state.file_ends[item.nodeid] = nextitem is None or \
        _scan_unit(nextitem) != _scan_unit(item)
    yield
    state.current = None
    if nextitem is None or (_keep_lab(state) and item.session.shouldfail):
        return
    for topology, last in list(state.last_user.items()):
        if last == item.nodeid and state.labs.is_up(topology):
            state.labs.down(topology)


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
    state = _state(item.config)
    problems = _splat_report(state)
    if call.when == "teardown" and state.leaks:
        unit = _scan_unit(item)
        if _handles(item):
            state.lab_used.add(unit)
        if state.file_ends.pop(item.nodeid, True) and unit in state.lab_used:
            state.lab_used.discard(unit)
            leaks = _leak_report(state)
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
        state.failed = True
        guests = _guests(item)
        start = _start_failure(state, report) if not guests else None
        try:
            if guests:
                _report_failure(state, item, report, guests)
            elif start:
                _report_start_failure(state, item, report, start)
        except Exception as e:  # the report must not hide the failure
            report.sections.append(("dcblab evidence",
                                    f"not gathered: {e!r}"))
    if call.when == "teardown":
        for g in _guests(item):
            g.history.clear()


def _report_failure(state, item, report, guests):
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
    handles = _handles(item)
    try:
        extras = item.config.hook.pytest_dcblab_failure_evidence(
            item=item, labs=handles)
    except Exception as e:   # a user's hook: its error, then ours go on
        extras = [[("pytest_dcblab_failure_evidence", f"failed: {e!r}")]]
    for extra in extras:
        report.sections.extend(extra or [])
    folder = _folder(state, item, report)
    labs = {id(h.lab): h.lab for h in handles}.values()
    written = evidence.save(folder, guests, found, history,
                            [(f"{lab.name}-keeper.log", lab.dir / "keeper.log")
                             for lab in labs]
                            + state.extra.get(item.nodeid, []))
    report.sections.append((
        "artefacts", f"{folder}/ (evidence gathered in {took:.2f} s)\n"
        + _tree(["report.txt", *written])))
    (folder / "report.txt").write_text(_report_text(report))


def _start_failure(state, report):
    """The _StartFailure of a lab whose start failed this item's set-up,
    or None."""
    if report.when != "setup":
        return None
    for failed in state.start_failed.values():
        if failed.error.splitlines()[0] in report.longreprtext:
            return failed
    return None


def _report_start_failure(state, item, report, failed):
    """A lab that failed to start: its logs as it left them, in the
    artefact folder of the first test it failed; later ones name it."""
    if failed.folder is not None:
        report.sections.append((
            "artefacts", f"{failed.folder}/ (lab {failed.lab} failed to "
            "start: its logs are with the first test that needed it)"))
        return
    folder = _folder(state, item, report)
    written, consoles = evidence.save_logs(folder, failed.lab, failed.logs)
    for guest, text in consoles.items():
        report.sections.append((f"console {guest} (tail)",
                                "\n".join(text.splitlines()[-60:])))
    report.sections.append((
        "artefacts", f"{folder}/ (lab {failed.lab} failed to start: its "
        "logs as they were then)\n" + _tree(["report.txt", *written])))
    (folder / "report.txt").write_text(_report_text(report))
    failed.folder = folder


def artefact_root(config: pytest.Config) -> Path:
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


def _folder(state, item, report):
    """The test's artefact folder (also a property of its junit XML
    record). Its first failure in this session replaces what a former run
    left there; a later one (a teardown after a failed call) goes into a
    sub-folder named after its phase."""
    folder = evidence.artefact_dir(artefact_root(state.config), item.nodeid)
    if item.nodeid in state.saved:
        folder = folder / report.when
    else:
        state.saved[item.nodeid] = folder
    shutil.rmtree(folder, ignore_errors=True)
    # junit XML writes the teardown report's properties, copied from the
    # item's when that report is made.
    if report.when != "teardown":
        item.user_properties.append(("dcblab_artefacts", str(folder)))
    else:
        report.user_properties.append(("dcblab_artefacts", str(folder)))
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


class _Times:
    """Seconds per test file (set-up, call and tear-down of its tests, a
    session lab's bring-up in the first test that asks for it), written at
    the end of the session to paths.suite_times() for make bench. A plugin
    object of the session (pytest_runtest_logreport gets no config)."""

    def __init__(self, state):
        self.state = state

    def pytest_runtest_logreport(self, report):
        seconds = self.state.file_seconds
        path = report.nodeid.split("::", 1)[0]
        seconds[path] = seconds.get(path, 0.0) + report.duration


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    state = _state(session.config)
    for error in state.labs.close():
        session.config.get_terminal_writer().line(f"dcblab: {error}",
                                                  red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    _write_times(session, exitstatus)


def _write_times(session, exitstatus):
    state = _state(session.config)
    # Only a session of the repository's own tests: the suite runs inner
    # pytest sessions of its own (tests/test_host_untouched.py, ...).
    if not any(f.startswith(("tests/", "docs/"))
               for f in state.file_seconds) or \
            Path(session.config.rootpath).resolve() != paths.ROOT.resolve():
        return
    try:
        paths.build_dir().mkdir(parents=True, exist_ok=True)
        paths.suite_times().write_text(json.dumps(
            {"exit": int(exitstatus), "files": state.file_seconds},
            indent=1))
    except OSError:
        pass


def pytest_terminal_summary(terminalreporter, config):
    tr = terminalreporter
    state = _state(config)
    if state.ups:
        tr.write_sep("-", "dcblab run")
        tr.write_line(_kernel_line(config))
        for name, topology, seconds in state.ups:
            tr.write_line(f"lab {name} ({_shown(topology)}): up in "
                          f"{seconds:.1f} s")
    if state.saved:
        tr.write_sep("-", "dcblab artefacts of failed tests")
        for nodeid, folder in state.saved.items():
            tr.write_line(f"{nodeid}: {folder}/")
    dcblab = paths.ROOT / "bin" / "dcblab"
    if Path(config.rootpath).resolve() == paths.ROOT.resolve():
        dcblab = "bin/dcblab"
    for name in state.kept:
        tr.write_line(f"lab {name} kept up: `{dcblab} status --name "
                      f"{name}`, `{dcblab} shell --name {name} h2`, "
                      f"`{dcblab} down --name {name}`")


def _shown(topology):
    """A topology file as the summary names it: dcblab's own by name."""
    topology = Path(topology)
    if topology.parent == paths.TOPOLOGY_DIR.resolve():
        return topology.stem
    return str(topology)


@pytest.fixture(scope="session", autouse=True)
def _junit_properties(request):
    """The run's kernel, flavour and backend as testsuite properties of
    the junit XML (--junitxml), for a CI that reads only that."""
    if getattr(request.config.option, "xmlpath", None) is None:
        yield
        return
    record = request.getfixturevalue("record_testsuite_property")
    f = flavour()
    record("dcblab_kernel", str(paths.boot_kernel(f.name)))
    record("dcblab_flavour", f.name)
    record("dcblab_backend", backend_name(request.config))
    yield
    state = _state(request.config)
    for name, topology, seconds in state.ups:
        record(f"dcblab_lab_{name}", f"{_shown(topology)} up in "
               f"{seconds:.1f} s")


def _handles(item):
    """The LabHandles an item used: as fixture values, and through
    dcblab_labs (a fixture of a wider scope, a getfixturevalue)."""
    found = [v for v in (getattr(item, "funcargs", None) or {}).values()
             if isinstance(v, LabHandle)]
    found += item.stash.get(_USED, [])
    return list({id(h): h for h in found}.values())


def _guests(item):
    found = [v for v in (getattr(item, "funcargs", None) or {}).values()
             if isinstance(v, Guest)]
    for h in _handles(item):
        found.extend(h.guests.values())
    return list({id(g): g for g in found}.values())
