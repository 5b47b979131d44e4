"""A variant's first build starts from the lab kernel's objects.

A kernel of the series minus a patch, or plus a user's patches
(variants.py), differs from the lab kernel in a few .c files, yet its
first build in a directory of its own compiled all ~1 300 objects again:
from ccache that is still kbuild's whole walk, gcc's driver, fixdep and
objtool per object (202 s on a 2-CPU machine where the lab kernel's
ccache build took the same, 2026-12-07).

So ``seed(flavour, base)`` runs between extract and patch of a variant's
build: when the variant has no objects yet and the base build (the
BUILD the variant was asked from) has a finished build of the flavour
from the same linux-source-6.1 and gcc, its object directory is copied
in, and make then does what it would do after an edit:

- the copy keeps every mtime, so objects stay newer than the sources
  tar unpacked;
- every file the base's series had patched when its objects were built
  (the ``tree/`` inputs of its build stamp) is marked changed in the
  variant's tree, and so is every file its own series patched already
  (quilt's list; the patch step marks those it patches next), so a file
  the base patched and the variant does not is compiled again from its
  unpatched text, and one the variant patched is compiled patched;
- the base's absolute paths in the copy (the kernel tree and object
  directory in each ``.cmd`` file's command and dependencies, the
  ``source`` link, the generated Makefile) are rewritten to the
  variant's, so kbuild compares commands and dependencies of this tree;
- the base's stamps are not copied: config and build run as usual, and
  kconfig touches only the symbols whose value the variant changes.

Anything that does not hold is one line and a cold build, as before.
"""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from dcblab.core import paths

from .common import tarball_id
from .kernel import BUILD_LOG, BUILD_STAMP, CONFIG_STAMP
from .series import quilt_files
from .stamps import tool_version

__all__ = ["ENV", "seed"]

ENV = "DCBLAB_SEED_FROM"
# Files of the base's object directory that belong to its own steps.
NOT_COPIED = (BUILD_STAMP, CONFIG_STAMP, BUILD_LOG)
# Larger files are objects, archives and images, never paths to rewrite.
TEXT_MAX = 1 << 20


def seed(flavour_name, base):
    """Copy base's objects of the flavour into this BUILD's, if it has
    none; returns what was done, in one line."""
    obj = paths.kernel_obj(flavour_name)
    base = Path(base).resolve()
    base_obj = base / obj.relative_to(paths.build_dir())
    if obj.exists():
        return f"{obj} exists: built on its own objects"
    inputs, why = _base_inputs(base_obj, base / paths.bzimage(
        flavour_name).relative_to(paths.build_dir()))
    if why:
        return f"no objects to start from ({why}): a cold build"
    t0 = time.monotonic()
    touched = _mark_changed(inputs)
    tmp = obj.with_name(obj.name + ".seed.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    # cp -a: mtimes, modes and symlinks as they are, in one process.
    subprocess.run(["cp", "-a", str(base_obj), str(tmp)], check=True)
    for name in NOT_COPIED:
        (tmp / name).unlink(missing_ok=True)
    rewritten = _rewrite_paths(tmp, {
        str(base / paths.kernel_src().relative_to(paths.build_dir())):
        str(paths.kernel_src()),
        str(base_obj): str(obj)})
    source = tmp / "source"
    if source.is_symlink():
        source.unlink()
        source.symlink_to(paths.kernel_src())
    tmp.rename(obj)
    return (f"objects of {base_obj} copied, {rewritten} files' paths "
            f"rewritten, {touched} patched files marked changed, in "
            f"{time.monotonic() - t0:.1f}s")


def _base_inputs(base_obj, bzimage):
    """(the inputs of base_obj's build stamp, None), or (None, why it
    cannot seed a variant)."""
    try:
        inputs = json.loads((base_obj / BUILD_STAMP).read_text())["inputs"]
    except (OSError, ValueError, KeyError):
        return None, f"{base_obj} has no finished build"
    if not bzimage.is_file():
        return None, f"{base_obj} has no bzImage"
    if inputs.get("linux-source-6.1") != tarball_id():
        return None, f"{base_obj} was built from another linux-source-6.1"
    if inputs.get("gcc") != tool_version(["gcc", "--version"]):
        return None, f"{base_obj} was built by another gcc"
    return inputs, None


def _mark_changed(inputs):
    """mtime now for each file of this tree the base's series had
    patched when its objects were built (the tree/ keys of its build
    stamp's inputs), and each this tree's series already patched (a tree
    patched by an earlier run whose objects were removed since); how
    many."""
    names = {k.removeprefix("tree/") for k in inputs if k.startswith("tree/")}
    names |= set(quilt_files(paths.kernel_src()))
    n = 0
    for name in sorted(names):
        f = paths.kernel_src() / name
        if f.is_file():
            os.utime(f)
            n += 1
    return n


def _rewrite_paths(top, old_to_new):
    """Replace each old path by its new one in the text files under top,
    mtimes kept; how many files changed."""
    pairs = [(o.encode(), n.encode()) for o, n in old_to_new.items()]
    n = 0
    for dirpath, _, names in os.walk(top):
        for name in names:
            f = Path(dirpath) / name
            st = f.lstat()
            if not f.is_file() or f.is_symlink() or st.st_size > TEXT_MAX:
                continue
            data = f.read_bytes()
            if b"\0" in data or not any(o in data for o, _ in pairs):
                continue
            for old, new in pairs:
                data = data.replace(old, new)
            f.write_bytes(data)
            os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
            n += 1
    return n
