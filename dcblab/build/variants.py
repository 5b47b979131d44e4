"""Kernels built from the series minus one patch, for ``make bench``.

A patch's cost is measured against the same series without it, not
against stock 6.1 (the other patches add the DCB driver the measurement
runs on).  ``kernel_without(name)`` builds that kernel with the lab
flavour in BUILD/variants/without-NAME/, a build directory of its own (its
own extracted tree, quilt state and objects), by running this package's
``kernel`` step with ``BUILD`` pointing there and ``DCBLAB_PATCH_DIR`` at a
copy of kernel-patches/ whose series leaves the patch out.  The first
build is a cold one (minutes); later ones hold by the build's own stamps.
"""

import os
import signal
import subprocess
import sys
import time

from dcblab.core import paths

from .common import BuildError, say
from .series import read_series

__all__ = ["MEASURED", "patch_named", "patch_dir_without", "kernel_without"]

# The patches whose cost `make bench` measures unless told others: those
# on the path of every classified packet (0004 in netdev_pick_tx(), 0001
# in the priority update).
MEASURED = ("0004", "0001")


def patch_named(prefix):
    """The series' patch whose file name starts with prefix (``0004`` or
    the whole name); BuildError, listing the series, for none or several."""
    names = read_series()
    hits = [n for n in names if n.startswith(prefix)]
    if len(hits) != 1:
        raise BuildError(f"{prefix!r} names {len(hits)} patches of "
                         f"{paths.PATCH_DIR / 'series'} (it has: "
                         f"{', '.join(names)})")
    return hits[0]


def patch_dir_without(name, dest):
    """dest: kernel-patches/ without name, its series without that line.
    Files are rewritten only when their content changed."""
    dest.mkdir(parents=True, exist_ok=True)
    want = {}
    for f in paths.PATCH_DIR.iterdir():
        if f.is_file() and f.name not in (name, "series"):
            want[f.name] = f.read_bytes()
    series = (paths.PATCH_DIR / "series").read_text().splitlines(True)
    want["series"] = "".join(
        line for line in series
        if line.split("#", 1)[0].split()[:1] != [name]).encode()
    for f in dest.iterdir():
        if f.name not in want:
            f.unlink()
    for fname, data in want.items():
        target = dest / fname
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)


def kernel_without(name, progress=say):
    """Build (or find built) the lab kernel of the series without patch
    name: (path of its bzImage, seconds the build step took)."""
    root = paths.build_dir() / "variants" / f"without-{name.split('-')[0]}"
    patch_dir = root / "kernel-patches"
    patch_dir_without(name, patch_dir)
    env = dict(os.environ, BUILD=str(root), DCBLAB_PATCH_DIR=str(patch_dir),
               FLAVOUR="lab")
    env.pop(paths.KERNEL_ENV, None)
    t0 = time.monotonic()
    # Its own process group, so that an interrupted bench stops the whole
    # build (python, make, the compilers), not only its first process.
    proc = subprocess.Popen([sys.executable, "-m", "dcblab.build", "kernel"],
                            cwd=paths.ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            progress(f"kernel without {name}: "
                     f"{line.rstrip().removeprefix('dcblab: ')}")
    finally:
        # Interrupted (Ctrl-C, the bench's SIGTERM): no build left behind.
        if proc.poll() is None and sys.exc_info()[0] is not None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        proc.stdout.close()
    if proc.returncode != 0:
        raise BuildError(f"the kernel without {name} did not build:\n"
                         + "\n".join(lines[-30:]))
    bzimage = root / "kernel-obj" / "arch/x86/boot/bzImage"
    if not bzimage.is_file():
        raise BuildError(f"the kernel without {name}: no {bzimage}")
    return bzimage, time.monotonic() - t0
