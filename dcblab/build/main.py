"""``python3 -m dcblab.build``: the entry point the Makefile calls."""

import argparse
import os
import sys
import time

from dcblab.core import paths
from dcblab.core.errors import DcblabError, UsageError
from dcblab.core.flavours import DEFAULT, FLAVOURS, flavour

from . import iproute2, kernel
from .checks import checkpatch
from .common import Step, say
from .seed import ENV as SEED_ENV
from .seed import seed
from .series import apply_patches, check_series
from .variants import kernel_with, kernel_without, patch_named

__all__ = ["main"]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m dcblab.build",
                                 description=kernel.__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("what", choices=["kernel", "patch", "checkpatch",
                                     "check-series", "dcb", "kernel-without",
                                     "kernel-with"])
    ap.add_argument("--patch", metavar="NNNN",
                    help="kernel-without: the patch the series leaves out "
                         "(its number or file name); the lab flavour's "
                         "kernel is built in BUILD/variants/without-NNNN/ "
                         "and its bzImage's path printed")
    ap.add_argument("--patches", metavar="DIR",
                    help="kernel-with: a directory of your own patches "
                         "(its series file, else its *.patch files in name "
                         "order), applied after the series; the kernel is "
                         "built in BUILD/variants/plus-HASH/, progress on "
                         "stderr, its bzImage's path alone on stdout")
    ap.add_argument("--flavour", metavar="NAME",
                    help=f"kernel flavour: {', '.join(FLAVOURS)} (default: "
                         f"$FLAVOUR, else {DEFAULT})")
    ap.add_argument("--force", action="store_true",
                    help="run checkpatch, check-series or the kernel's make "
                         "even if nothing changed since its last clean run")
    args = ap.parse_args(argv)
    try:
        name = flavour(args.flavour).name
        if args.what == "checkpatch":
            return checkpatch(args.force)
        if args.what == "check-series":
            return check_series(args.force)
        if args.what == "dcb":
            iproute2.build_dcb(args.force)
            return 0
        if args.what == "kernel-without":
            if not args.patch:
                raise UsageError("kernel-without needs --patch NNNN")
            bz, took = kernel_without(patch_named(args.patch))
            say(f"kernel without {args.patch} ready in {took:.1f}s")
            print(bz)
            return 0
        if args.what == "kernel-with":
            if not args.patches:
                raise UsageError("kernel-with needs --patches DIR")
            bz, took = kernel_with(args.patches, name, progress=_to_stderr)
            _to_stderr(f"kernel plus {args.patches} ready in {took:.1f}s")
            print(bz)
            return 0
        t0 = time.monotonic()
        with Step("extract"):
            kernel.extract()
        if os.environ.get(SEED_ENV):  # a variant (variants.py)
            with Step("seed"):
                say(f"seed: {seed(name, os.environ[SEED_ENV])}")
        with Step("patch"):
            apply_patches()
        if args.what == "patch":
            return 0
        with Step("config"):
            kernel.configure(name)
        with Step("build"):
            kernel.build_kernel(name, args.force)
        say(f"kernel ready in {time.monotonic() - t0:.1f}s: "
            f"{paths.bzimage(name)}")
        return 0
    except DcblabError as e:
        print(f"dcblab: error: {e}", file=sys.stderr)
        return e.exit_code


def _to_stderr(msg):
    print(f"dcblab: {msg}", file=sys.stderr, flush=True)
