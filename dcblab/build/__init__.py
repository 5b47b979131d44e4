"""Build glue: linux-source-6.1 + kernel-patches/ -> a bzImage per flavour.

kernel   extract, configure (tinyconfig + the flavour's fragments) and
         build, each flavour in its own object directory over one shared,
         patched source tree
series   kernel-patches/series: quilt application that keeps mtimes of
         unchanged files, failed-hunk reports, ``git apply --check``
checks   fragment parsing and the dropped-option check, checkpatch.pl
stamps   what lets checkpatch, check-series and the kernel's make run
         only when their inputs changed
iproute2 the guests' ``dcb``: Debian's iproute2 source with
         iproute2-patches/, fetched with apt into BUILD/iproute2
variants the series minus one patch, each in its own BUILD, for the
         patches' costs in ``make bench``; the series plus a user's
         patches (``make test PATCHES=DIR``, ``dcblab test
         --dcblab-patches DIR``)
main     ``python3 -m dcblab.build kernel|patch|checkpatch|check-series|dcb
         [--flavour NAME] [--force]``, ``kernel-without --patch N``,
         ``kernel-with --patches DIR``

Imports only dcblab.core.
"""

from . import iproute2, variants
from .checks import (check_config, checkpatch, dropped_options,
                     merge_fragments, parse_fragment)
from .common import BuildError, ConfigMismatch
from .kernel import (build_kernel, build_log, configure, extract,
                     fragment_files)
from .main import main
from .series import (apply_patches, check_applies, check_each_applies,
                     check_series, failed_hunks, read_series)
from .stamps import forget_check_stamps

__all__ = ["main", "BuildError", "ConfigMismatch", "iproute2", "variants",
           "extract", "configure", "build_kernel", "fragment_files",
           "build_log",
           "read_series", "apply_patches", "failed_hunks", "check_series",
           "check_applies", "check_each_applies",
           "parse_fragment", "merge_fragments", "check_config",
           "dropped_options", "checkpatch", "forget_check_stamps"]
