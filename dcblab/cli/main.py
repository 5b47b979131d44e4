"""bin/dcblab: the argument parser and the one error handler."""

import argparse
import importlib
import os
import signal
import sys

from ..core.errors import DcblabError

__all__ = ["main", "parser"]

# Command -> the module of its group. A command imports only its own
# group (`dcblab exec` does not load bench, demo and the build code);
# `dcblab -h` and unknown commands load them all.
_GROUPS = {
    "lab": ("up", "status", "down", "restart", "reap"),
    "guest": ("exec", "shell", "console", "logs", "cp", "reset", "pcp"),
    "wire": ("capture", "link"),
    "demo": ("demo",),
    "bench": ("bench",),
    "soak": ("soak",),
    "plot": ("plot",),
    "top": ("top",),
    "course": ("lab",),
    "export": ("export",),
    "snapshots": ("snapshots",),
    "usertests": ("test",),
    "sim": ("sim",),
}


def parser(command=None):
    """The argument parser; with COMMAND, only its group's commands."""
    ap = argparse.ArgumentParser(
        prog="dcblab",
        description="A QEMU lab for DCB priorities and the network cgroups.",
        epilog="Guests run under QEMU directly, or as libvirt domains with "
               "`up --backend libvirt` (DCBLAB_BACKEND=libvirt): then `up` "
               "prints the LIBVIRT_DEFAULT_URI for virsh. docs/lab.md, "
               "docs/libvirt.md.")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    groups = [g for g, cmds in _GROUPS.items() if command in cmds] or \
        list(_GROUPS)
    for group in groups:
        importlib.import_module(f"{__package__}.{group}").add_parsers(sub)
    return ap


def parse(argv):
    """Options may come anywhere before `--`; what follows it is the
    guest command of `exec` (never parsed as dcblab options)."""
    ap = parser(argv[0] if argv else None)
    if argv and argv[0] == "test":
        # Everything after `test` is pytest's (options included), unparsed.
        args = ap.parse_args(["test"])
        args.pytest_args = list(argv[1:])
        return args
    if "--" not in argv:
        return ap.parse_args(argv)
    i = argv.index("--")
    args = ap.parse_args(argv[:i])
    if not hasattr(args, "argv"):
        ap.error(f"{args.cmd} takes no command after --")
    args.argv = list(args.argv or []) + argv[i + 1:]
    return args


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else list(argv))
    try:
        return args.func(args)
    except DcblabError as e:
        # One line: a user's mistake or a lab's failure is never a traceback.
        print(f"dcblab: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:
        # `dcblab ... | head`: the reader has gone. Quiet, as cat is, and
        # with stdout on /dev/null so that the flush at exit cannot raise
        # again; 141 is a shell's status for a SIGPIPE death.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        # Interrupted: exit 130 whatever comes next. Another Ctrl-C while
        # the interpreter exits (a keeper that stopped within the 0.2 s
        # between two, seen in CI) would otherwise end the process by
        # SIGINT instead.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        return 130
