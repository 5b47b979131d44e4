"""Kernels built from the series minus one patch, for ``make bench``.

A patch's cost is measured against the same series without it, not
against stock 6.1 (the other patches add the DCB driver the measurement
runs on).  ``kernel_without(name)`` builds that kernel with the lab
flavour in BUILD/variants/without-NAME/, a build directory of its own (its
own extracted tree, quilt state and objects), by running this package's
``kernel`` step with ``BUILD`` pointing there and ``DCBLAB_PATCH_DIR`` at a
copy of kernel-patches/ whose series leaves the patch out.  The first
build starts from this BUILD's objects of the same flavour when they are
built (seed.py: only what the patches change is compiled; 47 s against
221 s from ccache alone, 2026-12-07); later ones hold by the build's own
stamps.

``kernel_with(dir)`` is the other way round: the series plus a user's own
patches (``make test PATCHES=DIR``), applied after it, in
BUILD/variants/plus-HASH/, HASH a digest of those patches' names and
bytes, so an edited patch is a new kernel and never a stale one. Only the
KEEP_PLUS most recently built of these stay (1.7 GB each: a tree and its
objects).
"""

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from dcblab.core import paths

from .common import BuildError, say
from .seed import ENV as SEED_ENV
from .series import first_failure, read_series

__all__ = ["MEASURED", "patch_named", "patch_dir_without", "kernel_without",
           "user_patches", "plus_name", "patch_dir_with", "kernel_with",
           "USER_DIR", "KEEP_PLUS"]

# The patches whose cost `make bench` measures unless told others: those
# on the path of every classified packet (0004 in netdev_pick_tx(), 0001
# in the priority update).
MEASURED = ("0004", "0001")
# Where a plus- variant's patch dir holds the user's patches (their names
# may be ours: 0001-...).
USER_DIR = "user"
KEEP_PLUS = 2


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
    want = {}
    for f in paths.PATCH_DIR.iterdir():
        if f.is_file() and f.name not in (name, "series"):
            want[f.name] = f.read_bytes()
    series = (paths.PATCH_DIR / "series").read_text().splitlines(True)
    want["series"] = "".join(
        line for line in series
        if line.split("#", 1)[0].split()[:1] != [name]).encode()
    _sync_dir(dest, want)


def _sync_dir(dest, want):
    """dest holds exactly want ({relative name: bytes}); files are
    rewritten only when their content changed."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in sorted(dest.rglob("*"), reverse=True):
        rel = str(f.relative_to(dest))
        if f.is_file() and rel not in want:
            f.unlink()
        elif f.is_dir() and not any(n.startswith(rel + "/") for n in want):
            f.rmdir()
    for fname, data in want.items():
        target = dest / fname
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)


def user_patches(directory):
    """The patches of a user's directory, in the order they apply: those
    its ``series`` file names, else its *.patch files in name order."""
    d = Path(directory)
    if not d.is_dir():
        raise BuildError(f"PATCHES={directory}: not a directory of "
                         "*.patch files")
    if (d / "series").is_file():
        found = [d / n for n in read_series(d)]
    else:
        found = sorted(d.glob("*.patch"))
    if not found:
        raise BuildError(f"PATCHES={directory}: no *.patch files and no "
                         "series file naming any")
    return found


def plus_name(patches):
    """plus-HASH: the variant of the series plus patches (paths), HASH
    over their names, order and bytes."""
    h = hashlib.sha256()
    for p in patches:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return f"plus-{h.hexdigest()[:12]}"


def patch_dir_with(patches, dest):
    """dest: kernel-patches/ plus patches under USER_DIR/, named after
    ours in its series."""
    want = {f.name: f.read_bytes() for f in paths.PATCH_DIR.iterdir()
            if f.is_file()}
    lines = [f"{USER_DIR}/{p.name}\n" for p in patches]
    want["series"] = want["series"] + "".join(lines).encode()
    want.update({f"{USER_DIR}/{p.name}": p.read_bytes() for p in patches})
    _sync_dir(dest, want)


def kernel_with(directory, flavour_name="lab", progress=say):
    """Build (or find built) the kernel of the series plus the patches of
    directory (user_patches): (path of its bzImage, seconds the build
    step took). A patch that does not apply is one line naming it and
    the file of its first failing hunk."""
    patches = user_patches(directory)
    root = paths.build_dir() / "variants" / plus_name(patches)
    patch_dir_with(patches, root / "kernel-patches")
    os.utime(root)          # used now: the last to go in _prune_plus
    _prune_plus(root)
    try:
        found = _build_variant(root, root / "kernel-patches", flavour_name,
                               f"kernel plus {directory}", progress)
    except BuildError as e:
        failed = first_failure(getattr(e, "output", str(e)))
        if failed is None or not failed[0].startswith(USER_DIR + "/"):
            raise
        name, where = failed
        raise BuildError(f"PATCHES: {Path(directory) / name.split('/', 1)[1]}"
                         f" does not apply after {paths.PATCH_DIR / 'series'}"
                         f": {where}") from None
    return found


def _prune_plus(keep):
    """All but the KEEP_PLUS most recently made plus- variants removed,
    keep (the one about to build) among those kept."""
    built = sorted(keep.parent.glob("plus-*"),
                   key=lambda d: (d == keep, d.stat().st_mtime),
                   reverse=True)
    for d in built[KEEP_PLUS:]:
        shutil.rmtree(d, ignore_errors=True)


def kernel_without(name, progress=say):
    """Build (or find built) the lab kernel of the series without patch
    name: (path of its bzImage, seconds the build step took)."""
    root = paths.build_dir() / "variants" / f"without-{name.split('-')[0]}"
    patch_dir = root / "kernel-patches"
    patch_dir_without(name, patch_dir)
    return _build_variant(root, patch_dir, "lab", f"kernel without {name}",
                          progress)


def _build_variant(root, patch_dir, flavour_name, label, progress):
    """`python3 -m dcblab.build kernel` with BUILD=root and the patch dir
    patch_dir: (its bzImage, seconds)."""
    env = dict(os.environ, BUILD=str(root), DCBLAB_PATCH_DIR=str(patch_dir),
               FLAVOUR=flavour_name)
    # Its first build starts from this BUILD's objects (seed.py).
    env[SEED_ENV] = str(paths.build_dir())
    env.pop(paths.KERNEL_ENV, None)
    t0 = time.monotonic()
    # Its own process group, so that an interrupted bench stops the whole
    # build (python, make, the compilers), not only its first process.
    proc = subprocess.Popen([sys.executable, "-m", "dcblab.build", "kernel"],
                            cwd=paths.ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines = []
    failed = False
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            # Its error is this one's BuildError, not progress.
            failed = failed or line.startswith("dcblab: error: ")
            if not failed:
                progress(f"{label}: "
                         f"{line.rstrip().removeprefix('dcblab: ')}")
    finally:
        # Interrupted (Ctrl-C, the bench's SIGTERM): no build left behind.
        if proc.poll() is None and sys.exc_info()[0] is not None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        proc.stdout.close()
    if proc.returncode != 0:
        e = BuildError(f"the {label} did not build:\n"
                       + "\n".join(lines[-30:]))
        e.output = "\n".join(lines)
        raise e
    obj = paths.kernel_obj(flavour_name).relative_to(paths.build_dir())
    bzimage = root / obj / "arch/x86/boot/bzImage"
    if not bzimage.is_file():
        raise BuildError(f"the {label}: no {bzimage}")
    return bzimage, time.monotonic() - t0
