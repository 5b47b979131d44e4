"""What every command module shares: output, lab lookup, signals."""

import os
import signal
import sys

from ..core.errors import UsageError
from ..lab import LabError, check_name, list_labs

__all__ = ["say", "note", "lab_name", "need_images", "sigterm_as_exit",
           "named"]


def say(msg):
    print(msg, flush=True)


def note(msg):
    """Progress that must not mix with data on stdout."""
    print(msg, file=sys.stderr, flush=True)


def need_images():
    from ..core import paths  # not at import: `dcblab exec` does without
    paths.check_images()


def sigterm_as_exit():
    """SIGTERM unwinds like Ctrl-C, so `up` removes what it made."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)


def lab_name(args):
    """--name, $DCBLAB_LAB, or the only lab up; a one-line error
    otherwise."""
    if args.name is not None:
        return check_name(args.name)
    if os.environ.get("DCBLAB_LAB"):
        return check_name(os.environ["DCBLAB_LAB"])
    labs = list_labs()
    if len(labs) == 1:
        return labs[0]
    if not labs:
        raise LabError("no lab is up: start one with `dcblab up`")
    raise UsageError(f"several labs are up ({', '.join(labs)}): pick one "
                     "with --name")


def named(parser):
    parser.add_argument("--name", help="lab name (default: $DCBLAB_LAB, "
                        "or the only lab up)")
    return parser
