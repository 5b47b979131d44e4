"""What a guest needs to boot, and what `up` says when one cannot.

The least memory a guest boots in is derived from the boot image's files
(dcblab.lab.memory): `up` refuses a machine below it, one line each,
before anything starts. A guest whose boot fails all the same (a panic,
an initramfs that did not fit in RAM) fails at once with the console line
that says why, not at the agent's timeout. Most of this runs on image
files made here (BUILD points at them); three tests boot a guest: the
real image just below and at the bound, and a lab whose guests panic.
"""

import gzip
import math
import os
import struct
import subprocess
import sys
import time

import pytest

from dcblab.backends import Machine, QemuVm, VmError, VmSpec
from dcblab.core import paths
from dcblab.core.flavours import flavour
from dcblab.guest import Agent, Console
from dcblab.lab import (MARGIN_MIB, ImageError, check_memory, image_floor,
                        initramfs_unpacked, kernel_init_size)
from dcblab.topology import TopologyError, load

DCBLAB = [sys.executable, str(paths.ROOT / "bin" / "dcblab")]
MIB = 1 << 20
PAGE = 4096
FABRIC = paths.ROOT / "topology" / "dcb-fabric.toml"
# The schema's most vCPUs (parser: cpus 1..8): the per-CPU areas grow
# with them, so the bound must hold there.
MOST_CPUS = 8
# The lab kernel as built, before a test points BUILD elsewhere.
KERNEL = paths.bzimage("lab")


def _cpio(path, files):
    """A newc archive at path of files {name: size in bytes}, made by
    cpio(1) as guest-image/mkinitramfs makes the real one."""
    src = path.parent / f"{path.name}.d"
    src.mkdir()
    for name, size in files.items():
        (src / name).write_bytes(b"x" * size)
    names = "".join(f"{n}\n" for n in files).encode()
    with open(path, "wb") as out:
        subprocess.run(["cpio", "--quiet", "-o", "-H", "newc"], input=names,
                       stdout=out, cwd=src, check=True)
    return path


def _bzimage(path, init_size, version=0x20f):
    """Enough of a bzImage for its boot protocol header."""
    head = bytearray(0x300)
    head[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", head, 0x206, version)
    struct.pack_into("<I", head, 0x260, init_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(head))
    return path


@pytest.fixture
def build(tmp_path, monkeypatch):
    """An empty BUILD of this test's own: paths.bzimage() and
    paths.initramfs() point into it."""
    root = tmp_path / "build"
    root.mkdir()
    monkeypatch.setenv("BUILD", str(root))
    return root


# --- the bound, from the files -----------------------------------------------

def test_unpacked_size_counts_each_file_in_whole_pages(tmp_path):
    cpio = _cpio(tmp_path / "a.cpio", {"one": 1, "page": PAGE,
                                       "page-and-one": PAGE + 1})
    assert initramfs_unpacked(cpio) == PAGE + PAGE + 2 * PAGE


def test_unpacked_size_of_a_gzip_initramfs_is_that_of_its_archive(tmp_path):
    cpio = _cpio(tmp_path / "a.cpio", {"f": 3 * PAGE + 5})
    gz = tmp_path / "a.cpio.gz"
    gz.write_bytes(gzip.compress(cpio.read_bytes()))
    assert initramfs_unpacked(gz) == initramfs_unpacked(cpio) == 4 * PAGE


def test_unpacked_size_adds_up_archives_one_after_another(tmp_path):
    a = _cpio(tmp_path / "a.cpio", {"a": PAGE})
    b = _cpio(tmp_path / "b.cpio", {"b": 2 * PAGE})
    both = tmp_path / "both.cpio"
    both.write_bytes(a.read_bytes() + b.read_bytes())
    assert initramfs_unpacked(both) == 3 * PAGE


def test_an_initramfs_that_is_no_newc_archive_is_named(tmp_path):
    bad = tmp_path / "x.cpio"
    bad.write_bytes(b"not an archive" * 20)
    with pytest.raises(ImageError, match=f"^{bad}: not a newc cpio archive"):
        initramfs_unpacked(bad)


def test_a_kernel_without_a_boot_header_is_named(tmp_path):
    bad = tmp_path / "bzImage"
    bad.write_bytes(b"\0" * 0x300)
    with pytest.raises(ImageError, match=f"^{bad}: not a bzImage"):
        kernel_init_size(bad)


def test_floor_is_kernel_initramfs_twice_its_files_memmap_and_margin(
        tmp_path):
    kernel = _bzimage(tmp_path / "bzImage", 20 * MIB)
    files = 10 * MIB
    cpio = _cpio(tmp_path / "a.cpio", {"big": files})
    # The memmap (64 bytes per 4 KiB page) comes out of the same RAM.
    need = (20 * MIB + cpio.stat().st_size + 2 * files) * 64 / 63
    assert image_floor(kernel, cpio).mib == math.ceil(need / MIB) + MARGIN_MIB


def test_floor_moves_with_the_initramfs(tmp_path):
    kernel = _bzimage(tmp_path / "bzImage", 20 * MIB)
    small = image_floor(kernel, _cpio(tmp_path / "s.cpio", {"f": 10 * MIB}))
    big = image_floor(kernel, _cpio(tmp_path / "b.cpio", {"f": 20 * MIB}))
    # 10 MiB more files: 10 in the archive, 20 in the tmpfs's half.
    assert big.mib - small.mib in (30, 31)


def test_a_flavour_floor_above_the_image_floor_is_no_refusal(build):
    """The debug flavour's guests get its floor whatever the file says:
    those are what must fit the image."""
    debug = flavour("debug")
    _bzimage(paths.bzimage(debug.name), 200 * MIB)
    _cpio(paths.initramfs(), {"f": MIB})
    topo = load(FABRIC)
    floor = check_memory(topo, debug).mib
    assert max(h.memory_mib for h in topo.hosts) < floor < \
        debug.min_memory_mib


def test_up_refuses_every_machine_below_the_floor_before_starting(build,
                                                                tmp_path):
    topo = load(FABRIC)
    _bzimage(paths.bzimage(), 200 * MIB)
    _cpio(paths.initramfs(), {"f": MIB})
    floor = image_floor(paths.bzimage(), paths.initramfs())
    assert all(h.memory_mib < floor.mib for h in topo.hosts)
    run = tmp_path / "run"
    r = subprocess.run(DCBLAB + ["up", str(FABRIC), "--name", "floor"],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "DCBLAB_RUN": str(run),
                            "FLAVOUR": "lab"})
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    want = [f"{FABRIC}: {'switch' if h.is_switch else 'host'} \"{h.name}\": "
            f"memory_mib must be at least {floor.mib} for this boot image, "
            f"got {h.memory_mib}: {floor.why()}" for h in topo.hosts]
    want[0] = f"dcblab: {want[0]}"
    assert r.stderr.splitlines() == want
    assert not run.exists() or list(run.iterdir()) == []


def test_up_counts_hosts_and_switches_apart(build, tmp_path):
    """`up`'s first line, printed before the image check refuses."""
    topo = load(FABRIC)
    _bzimage(paths.bzimage(), 200 * MIB)
    _cpio(paths.initramfs(), {"f": MIB})
    r = subprocess.run(DCBLAB + ["up", str(FABRIC), "--name", "count"],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "DCBLAB_RUN": str(tmp_path / "r"),
                            "FLAVOUR": "lab"})
    switches = len(topo.switches)
    assert switches == 1 and len(topo.links) > 1
    assert r.stdout.splitlines()[0] == (
        f"dcblab up: lab count from {FABRIC} ({len(topo.hosts) - switches} "
        f"hosts, 1 switch, {len(topo.links)} links)")


def test_check_memory_error_names_the_file_host_key_value_and_why(build):
    topo = load(paths.default_topology())
    _bzimage(paths.bzimage(), 200 * MIB)
    _cpio(paths.initramfs(), {"f": MIB})
    with pytest.raises(TopologyError) as e:
        check_memory(topo, flavour("lab"))
    first = str(e.value).splitlines()[0]
    assert first.startswith(f"{topo.path}: host \"h1\": memory_mib must be "
                            "at least ")
    assert f"got {topo.host('h1').memory_mib}: the initramfs (" in first
    assert "is unpacked into a tmpfs of at most half the RAM" in first


# --- a boot that failed ------------------------------------------------------

class _ConsoleOnly(Machine):
    """A guest that is a console file the test writes: no QEMU, and an
    agent socket nobody listens on."""

    def __init__(self, rundir):
        self.name, self.rundir, self.pid = "h1", rundir, None
        self.t_start = time.monotonic()
        self.console = Console(rundir / "console.log", "h1")
        self.agent = Agent(rundir / "qga.sock", "h1")

    def start(self):
        return self

    def alive(self):
        return True

    def stop(self, grace=3.0):
        pass

    def log_path(self):
        return self.rundir / "qemu.log"


def test_a_boot_failure_ends_the_wait_for_the_agent_naming_the_line(
        tmp_path):
    line = "[    0.855680] Initramfs unpacking failed: write error"
    (tmp_path / "console.log").write_text(
        f"{line}\n[    1.431595] dcblab-init: started (pid 1)\n")
    with pytest.raises(VmError) as e:
        _ConsoleOnly(tmp_path).wait_ready(timeout=30)
    assert str(e.value) == f"h1: boot failed: {line}"


def test_a_boot_failure_ends_the_wait_for_init_naming_the_line(tmp_path):
    line = "[    1.937902] Kernel panic - not syncing: No working init found."
    (tmp_path / "console.log").write_text(f"{line}\n")
    with pytest.raises(VmError) as e:
        _ConsoleOnly(tmp_path).wait_init(timeout=30)
    assert str(e.value) == f"h1: boot failed: {line}"


# --- booting the real image --------------------------------------------------

def _boot(tmp_path, name, memory_mib, cpus):
    paths.check_images()
    vm = QemuVm(VmSpec(name, paths.bzimage(), paths.initramfs(),
                       memory_mib=memory_mib, cpus=cpus), tmp_path / name)
    vm.start()
    return vm


def test_guest_below_the_floor_fails_at_once_naming_the_console_line(
        tmp_path):
    floor = image_floor(paths.bzimage(), paths.initramfs())
    # Well below what the formula asks, margin aside.
    mem = floor.mib - MARGIN_MIB - 8
    vm = _boot(tmp_path, "below", mem, 1)
    try:
        with pytest.raises(VmError) as e:
            vm.wait_init(timeout=120)
            vm.wait_ready(timeout=120)
    finally:
        vm.stop(grace=1.0)
    msg = str(e.value)
    assert msg.startswith("below: boot failed: [") and "\n" not in msg
    assert msg.endswith("] Initramfs unpacking failed: write error"), msg


def test_guest_at_the_floor_boots_with_the_most_vcpus(tmp_path):
    floor = image_floor(paths.bzimage(), paths.initramfs())
    vm = _boot(tmp_path, "atfloor", floor.mib, MOST_CPUS)
    try:
        vm.wait_init(timeout=180)
        vm.wait_ready(timeout=180)
        rc = vm.agent.run(["true"]).rc
    finally:
        vm.stop(grace=1.0)
    assert rc == 0
    assert vm.console.boot_failure() is None


def test_up_of_a_lab_whose_guests_panic_fails_with_the_panic_line(build,
                                                                 tmp_path):
    """The real kernel with an empty initramfs: no init, no root, a panic;
    `up` fails with each guest's panic line, each host named once."""
    assert KERNEL.exists(), "the lab kernel is not built: make kernel"
    paths.bzimage().parent.mkdir(parents=True)
    paths.bzimage().symlink_to(KERNEL)
    _cpio(paths.initramfs(), {})
    run = tmp_path / "run"
    r = subprocess.run(DCBLAB + ["up", "--name", "panics"],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "DCBLAB_RUN": str(run),
                            "DCBLAB_ACCEL": "tcg", "FLAVOUR": "lab"})
    assert r.returncode == 1, r.stderr
    lines = r.stderr.removeprefix("dcblab: ").splitlines()
    hosts = [h.name for h in load(paths.default_topology()).hosts]
    assert sorted(line.split(":")[0] for line in lines) == sorted(hosts)
    for line in lines:
        host = line.split(":")[0]
        assert line.startswith(f"{host}: boot failed: [")
        assert "] Kernel panic - not syncing: " in line
        assert f"{host}: {host}:" not in line
    assert not run.exists() or list(run.iterdir()) == []
