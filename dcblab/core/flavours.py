"""Kernel flavours: which config fragments a kernel is built from, and what
a guest booting it needs.

``lab`` is the kernel the lab runs; ``debug`` adds KASAN, lockdep,
kmemleak, UBSAN and friends (kernel-patches/debug.config). The flavour in
use comes from ``FLAVOUR`` in the environment (as ``make test
FLAVOUR=debug`` sets it), default ``lab``.
"""

import os
from dataclasses import dataclass

from .errors import UsageError

__all__ = ["Flavour", "FLAVOURS", "flavour", "DEFAULT"]

DEFAULT = "lab"


@dataclass(frozen=True)
class Flavour:
    name: str
    fragments: tuple          # file names under kernel-patches/, in order
    min_memory_mib: int = 0   # a guest gets at least this much RAM
    kmemleak: bool = False    # the harness scans for leaks after each test
    about: str = ""


FLAVOURS = {
    "lab": Flavour("lab", ("lab.config",),
                   about="the lab kernel: tinyconfig + lab.config"),
    # KASAN keeps one shadow byte per 8 and kmemleak an object per
    # allocation. Measured: at 128 MiB the debug kernel boots but leaves
    # userspace 53 MiB (14 MiB available); at 256 MiB the receiver of the
    # 100k-frame two-cgroup scenario ran out of memory mid-suite (130 MiB
    # of unreclaimable slab, with or without the harness's kmemleak
    # scans) and panicked; at 512 MiB it passes. See how-it-works.md.
    "debug": Flavour("debug", ("lab.config", "debug.config"),
                     min_memory_mib=512, kmemleak=True,
                     about="lab + KASAN, lockdep, kmemleak, UBSAN, "
                           "DEBUG_LIST, hung-task and atomic-sleep checks"),
}


def flavour(name=None):
    """The Flavour NAME, or the one FLAVOUR in the environment names."""
    name = name or os.environ.get("FLAVOUR") or DEFAULT
    try:
        return FLAVOURS[name]
    except KeyError:
        raise UsageError(f"FLAVOUR={name!r}: unknown kernel flavour (known: "
                         f"{', '.join(FLAVOURS)})") from None
