"""bin/dcblab: the argument parser and the one error handler."""

import argparse
import sys

from ..core.errors import DcblabError
from . import bench, demo, guest, lab, wire

__all__ = ["main"]

_GROUPS = (lab, guest, wire, demo, bench)


def parser():
    ap = argparse.ArgumentParser(
        prog="dcblab",
        description="A QEMU lab for DCB priorities and the network cgroups.")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for group in _GROUPS:
        group.add_parsers(sub)
    return ap


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except DcblabError as e:
        # One line: a user's mistake or a lab's failure is never a traceback.
        print(f"dcblab: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
