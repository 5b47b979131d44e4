"""linux-source-6.1 + kernel-patches/ -> one bzImage per kernel flavour.

``python3 -m dcblab.build kernel [--flavour NAME]`` runs four steps, each
timed (and a variant's build a fifth, seed, after extract: seed.py):

extract  /usr/src/linux-source-6.1.tar.xz -> BUILD/linux-source-6.1, once
         (unpacked beside its final place and renamed, so an interrupted
         extract leaves nothing half-done behind).  Every flavour builds
         from this one tree.
patch    kernel-patches/series with quilt.  Patches already applied and
         unchanged stay applied; from the first changed one on, patches are
         popped and pushed again, and files whose content came out the same
         get their old mtime back, so make rebuilds only what changed.
config   tinyconfig + the flavour's fragments (lab: lab.config; debug:
         lab.config then debug.config, a later one overriding an earlier
         one) with merge_config.sh, then a check that every option of every
         fragment came out as requested; a dropped option is reported under
         the fragment that asked for it.  It runs again when a fragment
         or the series changed (a patch may add a Kconfig symbol).
build    bzImage with LOCALVERSION=-dcblab, objects in the flavour's own
         directory (BUILD/kernel-obj for lab, BUILD/kernel-obj-NAME for the
         others), which also holds the config stamp
         (.dcblab-config-inputs), the merged comment-free fragments
         merge_config.sh saw (dcblab-fragments.config), the build log
         (dcblab-build.log) and the build stamp (.dcblab-kernel-inputs).
         The kernel's make, ~15 s even with nothing to do, runs only when
         the stamp no longer holds: the series, the fragments, .config,
         the files quilt tracks in the tree, linux-source-6.1, gcc or the
         make arguments changed, or the bzImage is missing or not the one
         the last build made.  A file edited in the tree without quilt is
         not seen: use ``quilt edit`` or ``make kernel FORCE=1``.
"""

import os
import shutil
import subprocess
import time

from dcblab.core import paths
from dcblab.core.flavours import FLAVOURS, flavour

from . import ccache
from .checks import dropped_options, merge_fragments
from .common import (BuildError, ConfigMismatch, file_sha256, say,
                     tarball_id)
from .series import quilt_files, series_digests
from .stamps import Stamp, run_once, tool_version

__all__ = ["extract", "configure", "build_kernel", "fragment_files",
           "build_log", "BUILD_STAMP", "CONFIG_STAMP", "BUILD_LOG"]

# In each flavour's object directory: the build and config steps' stamps
# and the build's log.
BUILD_STAMP = ".dcblab-kernel-inputs"
CONFIG_STAMP = ".dcblab-config-inputs"
BUILD_LOG = "dcblab-build.log"


def fragment_files(flavour_name=None):
    """The flavour's config fragments under kernel-patches/, in merge order."""
    return [paths.PATCH_DIR / f for f in flavour(flavour_name).fragments]


def build_log(flavour_name=None):
    return paths.kernel_obj(flavour_name) / BUILD_LOG


def _config_stamp(flavour_name):
    return paths.kernel_obj(flavour_name) / CONFIG_STAMP


# --- extract ---------------------------------------------------------------

def extract():
    src = paths.kernel_src()
    stamp = paths.build_dir() / ".extracted"
    tarball = tarball_id()      # raises, saying what to install, if missing
    if src.is_dir() and stamp.exists() and stamp.read_text() == tarball:
        say(f"extract: {src} is up to date")
        return
    paths.build_dir().mkdir(parents=True, exist_ok=True)
    tmp = paths.build_dir() / ".extract.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(src, ignore_errors=True)
    # Every flavour's objects were built from the old tree.
    for name in FLAVOURS:
        shutil.rmtree(paths.kernel_obj(name), ignore_errors=True)
    (paths.build_dir() / ".applied.json").unlink(missing_ok=True)
    tmp.mkdir()
    subprocess.run(["tar", "-xf", str(paths.KERNEL_TARBALL), "-C", str(tmp)],
                   check=True)
    (tmp / "linux-source-6.1").rename(src)
    tmp.rmdir()
    stamp.write_text(tarball)


# --- config ----------------------------------------------------------------

def _make_argv(flavour_name, args):
    return ["make", "-C", str(paths.kernel_src()),
            f"O={paths.kernel_obj(flavour_name)}", "LOCALVERSION=-dcblab",
            *ccache.make_vars(paths.kernel_src(),
                               paths.kernel_obj(flavour_name)),
            *args]


def _make(flavour_name, args):
    argv = _make_argv(flavour_name, args)
    r = subprocess.run(argv, capture_output=True, text=True,
                       env=ccache.environment(paths.build_dir()))
    if r.returncode != 0:
        raise BuildError(f"{' '.join(argv)} failed:\n{r.stdout[-3000:]}"
                         f"{r.stderr[-3000:]}")


def configure(flavour_name=None):
    """tinyconfig + the flavour's fragments; raise ConfigMismatch if Kconfig
    dropped any option a fragment asked for."""
    name = flavour(flavour_name).name
    obj = paths.kernel_obj(name)
    fragments = fragment_files(name)
    merged = merge_fragments(fragments)
    stamp = _config_stamp(name)
    # The series too: a patch may add or change a Kconfig symbol.
    inputs = " ".join([tarball_id(), *map(file_sha256, fragments),
                       *series_digests().values()])
    config = obj / ".config"
    if config.exists() and stamp.exists() and stamp.read_text() == inputs:
        say("config: up to date")
    else:
        obj.mkdir(parents=True, exist_ok=True)
        clean = obj / "dcblab-fragments.config"
        clean.write_text("".join(
            f"{k}={v}\n" if v is not None else f"# {k} is not set\n"
            for k, (v, _) in merged.items()))
        _make(name, ["tinyconfig"])
        r = subprocess.run(
            [str(paths.kernel_src() / "scripts/kconfig/merge_config.sh"),
             "-m", "-O", str(obj), str(config), str(clean)],
            capture_output=True, text=True, cwd=obj)
        if r.returncode != 0:
            raise BuildError(f"merge_config.sh failed:\n{r.stdout}{r.stderr}")
        _make(name, ["olddefconfig"])
        stamp.write_text(inputs)
    dropped = dropped_options(merged, config.read_text())
    if dropped:
        stamp.unlink(missing_ok=True)
        raise ConfigMismatch("\n".join(
            f"{frag}: Kconfig did not keep {len(bad)} option(s) "
            "(missing dependency or renamed symbol?):\n  " + "\n  ".join(bad)
            for frag, bad in dropped))
    names = " + ".join(f.name for f in fragments)
    say(f"config: all {len(merged)} options of {names} as requested")


# --- build -----------------------------------------------------------------

def _build_stamp(flavour_name):
    obj = paths.kernel_obj(flavour_name)
    src = paths.kernel_src()
    config = obj / ".config"
    inputs = {**series_digests(),
              "linux-source-6.1": tarball_id(),
              **{f.name: file_sha256(f) for f in fragment_files(flavour_name)},
              ".config": file_sha256(config) if config.exists() else None,
              **{f"tree/{f}": file_sha256(src / f) if (src / f).is_file()
                 else None for f in quilt_files(src)},
              "gcc": tool_version(["gcc", "--version"]),
              "make": " ".join(_make_argv(flavour_name, ["bzImage"]))}
    return Stamp(obj / BUILD_STAMP, inputs,
                 [paths.bzimage(flavour_name)])


def build_kernel(flavour_name=None, force=False):
    """make bzImage in the flavour's object directory, unless its stamp
    holds (see the module doc) and not force."""
    name = flavour(flavour_name).name
    run_once("build", _build_stamp(name), lambda: _make_bzimage(name),
             "nothing changed since the last build", force)


def _make_bzimage(name):
    log = build_log(name)
    bzimage = paths.bzimage(name)
    argv = _make_argv(name, [f"-j{os.cpu_count() or 1}", "bzImage"])
    cache_before = ccache.counters(paths.build_dir())
    t0 = time.monotonic()
    with open(log, "w") as out:
        env = ccache.environment(paths.build_dir())
        env["MAKEFLAGS"] = not_silent(env.get("MAKEFLAGS", ""))
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                env=env)
        last = t0
        while proc.poll() is None:
            time.sleep(0.5)
            now = time.monotonic()
            if now - last >= 15:
                last = now
                say(f"build: {_objects_so_far(log)} objects so far, "
                    f"{now - t0:.0f}s")
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-40:]
        raise BuildError(f"kernel build failed (full log: {log}):\n"
                         + "\n".join(tail))
    say(f"build: {bzimage} ({bzimage.stat().st_size // 1024} KiB)")
    cached = ccache.summary(cache_before, ccache.counters(paths.build_dir()))
    if cached:
        say(f"build: {cached}")


def not_silent(makeflags):
    """MAKEFLAGS without -s: `make -s kernel` would pass it down and
    kbuild would then print no "CC" line, which the progress counts."""
    flags, sep, rest = makeflags.partition(" ")
    if flags.startswith("-"):   # no single-letter flags: "-j2 ..."
        return makeflags
    return flags.replace("s", "") + sep + rest


def _objects_so_far(log):
    with open(log, errors="replace") as f:
        return sum(1 for line in f
                   if line.lstrip().startswith(("CC ", "AS ", "LD ")))
