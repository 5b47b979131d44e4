"""ccache for the kernel builds: objects compiled once on a machine are
reused by later builds of the same sources, in this BUILD dir or any
other (a fresh clone, CI's clone, a flavour's second object dir).

The kernel is compiled with ``CC="ccache gcc"``. ccache hashes what the
compiler would see (the preprocessed source or, in its direct mode, the
source and every header it read, with their contents), the compiler's
identity and the whole command line, so a changed patch, option or gcc
is a miss, never a stale object. Two settings make other BUILD dirs
hit:

- ``CCACHE_BASEDIR`` = BUILD: the absolute paths under it in the
  command line (the kernel's ``-I``, ``O=`` builds use them) are hashed
  relative to the compile's directory, which is the same in every BUILD.
- ``CCACHE_NOHASHDIR``: the compile's directory is not hashed when gcc
  writes debug info (the debug flavour). Such an object's DW_AT_comp_dir
  names the directory of the build that first compiled it; the kernel's
  own objects name their sources relative to it, so a debugger pointed
  at another tree (gdb's ``directory``) finds them as before.

Where: DCBLAB_CCACHE_DIR, else ``$XDG_CACHE_HOME/dcblab/ccache``
(``~/.cache/dcblab/ccache``), at most DCBLAB_CCACHE_SIZE (default 4G;
the lab and debug kernels took 0.10 GiB together, compressed). DCBLAB_CCACHE=off
builds with plain gcc. Switching it on or off changes every object's
command line, so kbuild recompiles them all once.
"""

import os
import shutil
import subprocess
from pathlib import Path

from dcblab.core.errors import DcblabError

__all__ = ["ENV", "enabled", "cache_dir", "macro_prefix_map", "make_vars",
           "environment", "counters", "summary"]

ENV = "DCBLAB_CCACHE"
DIR_ENV = "DCBLAB_CCACHE_DIR"
SIZE_ENV = "DCBLAB_CCACHE_SIZE"
DEFAULT_SIZE = "4G"
HIT_COUNTERS = ("direct_cache_hit", "preprocessed_cache_hit")
MISS_COUNTERS = ("cache_miss",)


def enabled():
    """Whether kernel builds go through ccache: DCBLAB_CCACHE (on unless
    off), and ccache installed (`make deps` installs it)."""
    v = os.environ.get(ENV, "on").strip().lower()
    if v in ("off", "0", "no"):
        return False
    if v not in ("on", "1", "yes", ""):
        raise DcblabError(f"{ENV}={v!r}: use on or off")
    return shutil.which("ccache") is not None


def cache_dir() -> Path:
    given = os.environ.get(DIR_ENV)
    if given:
        return Path(given).resolve()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dcblab" / "ccache"


def macro_prefix_map(src, obj):
    """gcc's flag that names the kernel's sources relative to its tree in
    __FILE__ (WARN()'s "at net/core/dev.c:NNN"). kbuild's own flag maps
    the tree's absolute path, but ccache hands gcc the source by its path
    relative to the object directory (CCACHE_BASEDIR), so that one no
    longer matches: this one maps the relative path."""
    return f"-fmacro-prefix-map={os.path.relpath(src, obj)}/="


def make_vars(src, obj):
    """The kernel make's arguments that route its compiles via ccache
    (kernel tree src, object directory obj)."""
    if not enabled():
        return []
    # On make's command line KCFLAGS would hide one from the environment.
    kcflags = f"{os.environ.get('KCFLAGS', '')} {macro_prefix_map(src, obj)}"
    return ["CC=ccache gcc", f"KCFLAGS={kcflags.strip()}"]


def environment(build_dir):
    """The environment of a kernel make under BUILD dir build_dir."""
    env = dict(os.environ)
    if enabled():
        env.update(CCACHE_DIR=str(cache_dir()),
                   CCACHE_BASEDIR=str(Path(build_dir).resolve()),
                   CCACHE_NOHASHDIR="1",
                   CCACHE_MAXSIZE=os.environ.get(SIZE_ENV, DEFAULT_SIZE))
    return env


def counters(build_dir):
    """ccache's counters (``--print-stats``) for our cache; {} if off or
    unreadable."""
    if not enabled():
        return {}
    r = subprocess.run(["ccache", "--print-stats"], capture_output=True,
                       text=True, env=environment(build_dir))
    if r.returncode != 0:
        return {}
    out = {}
    for line in r.stdout.splitlines():
        key, _, value = line.partition("\t")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def summary(before, after):
    """One line on what a build took from the cache: None if off.
    The counters are the cache's own, so another build using it at the
    same time would be counted too."""
    if not after:
        return None
    hits = sum(after.get(k, 0) - before.get(k, 0) for k in HIT_COUNTERS)
    misses = sum(after.get(k, 0) - before.get(k, 0) for k in MISS_COUNTERS)
    total = hits + misses
    share = f" ({100 * hits / total:.0f}%)" if total else ""
    return (f"ccache: {hits} of {total} compiles from the cache{share}, "
            f"{after.get('cache_size_kibibyte', 0) / 2**20:.2f} GiB in "
            f"{cache_dir()}")
