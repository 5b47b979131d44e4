"""Nothing of a lab stays on the host, on every path, on both backends.

Each lab here runs in a Sandbox (dcblab.testing.sandbox): a private mount
namespace whose /run, /tmp, /var/tmp and /dev/shm are empty and whose
/etc, /var, /usr, /root, /home, /opt and /srv are overlays with an empty
upper layer, so that any file the lab creates, changes or removes outside
its build directory shows, even one an earlier run left on this machine
(the first libvirt lab on a machine once created /run/mount, which CI's
used machine already had). Beside the files, host_state() compares the
root namespace's links and addresses, the named netns, /proc/modules, the
nftables ruleset, the mount tables and the processes carrying a run id.

The paths: up then down; `up` killed (SIGKILL) during the bring-up, which
its keeper must notice and undo by itself; the keeper killed, then its
guard, each followed by `dcblab reap`; an `up` that fails (a guest that
cannot boot); a pytest session killed while its lab fixture starts.
"""

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from dcblab.backends.libvirt import LIBVIRTD
from dcblab.core import paths, proc
from dcblab.testing.sandbox import Sandbox, diff_state, host_state

DCBLAB = [sys.executable, str(paths.ROOT / "bin" / "dcblab")]
NOTHING = {"added": [], "changed": [], "removed": []}
LAB = "untouched"


@pytest.fixture(scope="module", params=["qemu", "libvirt"])
def sandbox(request):
    if request.param == "libvirt" and not os.access(LIBVIRTD, os.X_OK):
        pytest.skip(f"{LIBVIRTD} is not installed (make deps installs it)")
    with Sandbox() as sb:
        sb.backend = request.param
        yield sb


@pytest.fixture(autouse=True)
def _no_lab_left(request):
    """A test that failed half-way leaves its lab up in the sandbox, where
    the host's `dcblab status` and `reap` cannot see it: stop it (SIGTERM
    to its keeper), then reap there."""
    yield
    if "sandbox" not in request.fixturenames:
        return
    sb = request.getfixturevalue("sandbox")
    if sb.holder is None:
        return
    root = sb.path("/run/dcblab")
    keepers = [_state(sb, d.name).get("keeper_pid")
               for d in (root.iterdir() if root.exists() else [])]
    for pid in filter(None, keepers):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for pid in filter(None, keepers):
        _wait(f"keeper {pid} to stop its lab",
              lambda: not proc.running(pid), 120)
    _dcblab(sb, ["reap"])


def _env(sb, **extra):
    return {**os.environ, "DCBLAB_BACKEND": sb.backend, **extra}


def _dcblab(sb, args, timeout=240, **extra):
    return sb.run(DCBLAB + args, cwd=paths.ROOT, env=_env(sb, **extra),
                  stdin=subprocess.DEVNULL, timeout=timeout)


def _state(sb, name=LAB):
    try:
        return json.loads(sb.path(f"/run/dcblab/{name}/state.json")
                          .read_text())
    except (OSError, ValueError):
        return {}


def _wait(what, cond, timeout=60):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(0.1)


@contextmanager
def untouched(sb):
    """The block leaves no write in the sandbox and the host as it was."""
    assert sb.writes() == NOTHING, "the sandbox was not clean before"
    before = host_state(sb)
    yield
    assert sb.writes() == NOTHING
    assert diff_state(before, host_state(sb)) == {}


def _reap(sb):
    r = _dcblab(sb, ["reap"])
    assert r.returncode == 0, r.stderr
    return r.stdout


# --- the harness itself -----------------------------------------------------------

def test_sandbox_sees_writes_to_what_the_host_already_holds(sandbox):
    """The check can fail on a used machine: a directory the host's /run
    already holds, a file changed, one removed, and mount(8) creating
    /run/mount for its utab (the libvirt lab's first-run leak)."""
    held = sorted(set(os.listdir("/run")) - {"lock", "user"})[:2]
    script = ("mkdir -p /var/lib/dcblab-probe && "
              "echo x >> /etc/hostname && rm /etc/issue && "
              "mkdir /tmp/a /tmp/b && mount --bind /tmp/a /tmp/b && " +
              "".join(f"mkdir -p /run/{p}.x && " for p in held) + "true")
    before = host_state(sandbox)
    r = sandbox.run(["sh", "-c", script])
    assert r.returncode == 0, r.stderr
    seen = sandbox.writes()
    after = host_state(sandbox)
    # Nothing of it reached the host; the sandbox's mounts are its own.
    assert Path("/etc/issue").exists()
    assert not Path("/var/lib/dcblab-probe").exists()
    # The next tests need an empty sandbox: a fresh one.
    sandbox.close()
    sandbox.start()
    assert {"/run/mount", "/var/lib/dcblab-probe", "/tmp/a", "/tmp/b",
            *(f"/run/{p}.x" for p in held)} <= set(seen["added"]), seen
    assert seen["changed"] == ["/etc/hostname"]
    assert seen["removed"] == ["/etc/issue"]
    assert list(diff_state(before, after)) == ["sandbox mounts"]


# --- the paths of a lab -------------------------------------------------------

def test_up_then_down_leaves_nothing(sandbox):
    """up, the everyday commands on the lab, down: nothing left, and
    while up nothing outside the lab's run directory."""
    pcap = paths.build_dir() / f"untouched-{sandbox.backend}.pcap"
    with untouched(sandbox):
        r = _dcblab(sandbox, ["up", "--name", LAB])
        assert r.returncode == 0, r.stderr
        for args in (["status", "--name", LAB],
                     ["exec", "--name", LAB, "h1", "--", "ping", "-c", "1",
                      "-W", "2", "198.51.100.2"],
                     ["capture", "--name", LAB, "l1", "-w", str(pcap),
                      "-c", "1", "--duration", "20"],
                     ["logs", "--name", LAB, "h2"]):
            r = _dcblab(sandbox, args)
            assert r.returncode == 0, (args, r.stderr)
        uri = _state(sandbox).get("backend_info", {}).get("uri")
        if uri:
            r = sandbox.run(["virsh", "-c", uri, "list"])
            assert r.returncode == 0, r.stderr
        # While up: only the lab's run directory.
        seen = sandbox.writes()
        stray = [p for p in seen["added"] if p not in
                 ("/run/dcblab", f"/run/dcblab/{LAB}") and
                 not p.startswith(f"/run/dcblab/{LAB}/")]
        assert (stray, seen["changed"], seen["removed"]) == ([], [], [])
        r = _dcblab(sandbox, ["down", "--name", LAB])
        assert r.returncode == 0, r.stderr
    pcap.unlink()


@pytest.mark.parametrize("when", ["wire", "2s"])
def test_killed_up_is_undone_by_its_keeper(sandbox, when):
    """`up` killed with SIGKILL while the lab comes up (when the wire is
    made: then the guests are restored from the topology's snapshot when
    one fits; or 2 s into a cold boot, as a user would: a restored lab is
    up in less): the keeper sees its client gone and removes everything
    by itself, before any `dcblab reap`."""
    cold = ["--cold"] if when == "2s" else []
    with untouched(sandbox):
        up = sandbox.popen(DCBLAB + ["up", "--name", LAB, *cold],
                           cwd=paths.ROOT,
                           env=_env(sandbox), stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL,
                           stdin=subprocess.DEVNULL, text=True)
        try:
            if when == "wire":
                for line in up.stdout:
                    if line.startswith("wire:"):
                        break
            else:
                time.sleep(2)
            st = _state(sandbox)
            up.kill()
        finally:
            up.kill()
            up.wait()
        assert up.returncode == -signal.SIGKILL
        _wait("the keeper's teardown",
              lambda: not sandbox.path(f"/run/dcblab/{LAB}").exists())
        if st.get("run_id"):
            _wait("the run's processes",
                  lambda: not proc.pids_with_tag(f"dcblab.run={st['run_id']}"))
        log = sandbox.writes()
        assert log == NOTHING, "left before any reap"
        assert "0 run(s) reaped" in _reap(sandbox)


def _up(sb):
    r = _dcblab(sb, ["up", "--name", LAB])
    assert r.returncode == 0, r.stderr
    st = _state(sb)
    assert st["status"] == "up"
    return st


@pytest.mark.parametrize("victim, survivor", [("keeper", "guard"),
                                              ("guard", "keeper")])
def test_killed_keeper_or_guard_then_reap_leaves_nothing(sandbox, victim,
                                                        survivor):
    """The keeper killed: its guard tears the run down by run id. The
    guard killed: the keeper gets SIGTERM (parent death) and stops the
    lab. Either way `dcblab reap` then finds nothing more."""
    with untouched(sandbox):
        st = _up(sandbox)
        os.kill(st[f"{victim}_pid"], signal.SIGKILL)
        _wait(f"the {survivor}",
              lambda: not proc.running(st[f"{survivor}_pid"]))
        assert "0 run(s) reaped" in _reap(sandbox)


def test_killed_keeper_and_guard_are_reaped(sandbox):
    """Both killed at once: nobody holds the lab; `dcblab reap` removes
    its QEMUs (libvirtd too), its netns and its run directory."""
    with untouched(sandbox):
        st = _up(sandbox)
        for pid in (st["guard_pid"], st["keeper_pid"]):
            os.kill(pid, signal.SIGKILL)
        _wait("the keeper", lambda: not proc.running(st["keeper_pid"]))
        assert proc.pids_with_tag(f"dcblab.run={st['run_id']}")
        out = _reap(sandbox)
        assert f"reaping run {st['run_id']}" in out


@pytest.fixture(scope="module")
def broken_build():
    """A build directory whose initramfs is not one: the guests' kernels
    start and cannot run init."""
    real = paths.build_dir()
    d = real / "broken-initramfs"
    d.mkdir(exist_ok=True)
    for name in ("kernel-obj", "tools", "libvirt-cache"):
        (real / name).mkdir(exist_ok=True)
        if not (d / name).exists():
            (d / name).symlink_to(real / name)
    (d / "initramfs.cpio").write_bytes(b"not a cpio archive\n" * 64)
    yield d


def test_failed_up_leaves_nothing(sandbox, broken_build):
    with untouched(sandbox):
        r = _dcblab(sandbox, ["up", "--name", LAB], timeout=300,
                    BUILD=str(broken_build))
        assert r.returncode != 0
        assert r.stderr.startswith("dcblab: "), r.stderr
        assert not sandbox.path(f"/run/dcblab/{LAB}").exists()
        assert "0 run(s) reaped" in _reap(sandbox)


@pytest.mark.parametrize("when", ["set-up", "test"])
def test_killed_pytest_leaves_nothing(sandbox, when):
    """A pytest session killed while its `lab` fixture boots (the keeper's
    client, pytest itself, is gone: the bring-up is undone) or while a
    test uses the lab (its owner is gone: the keeper stops it)."""
    d = paths.build_dir() / "sandbox-inner-tests"
    d.mkdir(exist_ok=True)
    (d / "test_inner.py").write_text("import time\n\n\n"
                                     "def test_needs_the_lab(lab):\n"
                                     "    time.sleep(600)\n")
    status = "starting" if when == "set-up" else "up"
    with untouched(sandbox):
        inner = sandbox.popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "-p", "dcblab.testing.plugin", f"--confcutdir={d}", str(d)],
            cwd=d, env=_env(sandbox, PYTHONPATH=str(paths.ROOT)),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL)
        try:
            def state():
                found = list(sandbox.path("/run/dcblab").glob(
                    "pytest-*/state.json"))
                return _state(sandbox, found[0].parent.name) if found \
                    else {}
            _wait(f"the inner session's lab {status}",
                  lambda: state().get("status") == status, 120)
            if when == "set-up":
                time.sleep(1)
        finally:
            inner.kill()
            inner.wait()
        _wait("the keeper's teardown",
              lambda: not sandbox.path("/run/dcblab").exists())
        assert sandbox.writes() == NOTHING
        assert "0 run(s) reaped" in _reap(sandbox)


def test_up_killed_before_its_keeper_started_is_reaped(sandbox):
    """The instant between `up` making the run directory and starting the
    keeper: a directory that nobody holds, without state.json. `dcblab
    reap` removes it (and the run root)."""
    with untouched(sandbox):
        r = sandbox.run([sys.executable, "-c",
                         "from dcblab.lab.runs import make_lab_dir; "
                         f"make_lab_dir({LAB!r})"], cwd=paths.ROOT,
                        env=_env(sandbox, PYTHONPATH=str(paths.ROOT)))
        assert r.returncode == 0, r.stderr
        assert sandbox.path(f"/run/dcblab/{LAB}/lock").exists()
        out = _reap(sandbox)
        assert f"lab {LAB}: left by an `up` that died before its keeper " \
               "started" in out
