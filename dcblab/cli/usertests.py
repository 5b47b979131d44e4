"""`dcblab test`: pytest on your own lab tests, from any directory, with
dcblab's plugin (docs/writing-tests.md)."""

import os
import subprocess
import sys

from ..core import paths
from ..core.errors import DcblabError
from .common import say

__all__ = ["add_parsers", "pytest_argv"]


def add_parsers(sub):
    p = sub.add_parser(
        "test", add_help=False,
        help="run your own lab tests with pytest, from any directory: "
             "dcblab's fixtures (lab, fabric, artefact), its splat watcher "
             "and failure reports; every argument goes to pytest "
             "(`dcblab test -h`: pytest's help, dcblab's options in it)")
    p.set_defaults(func=cmd_test, pytest_args=[])


def pytest_argv(args):
    """The pytest command `dcblab test ARGS` runs."""
    return [sys.executable, "-m", "pytest", "-p", "dcblab.testing.plugin",
            *args]


def _env():
    env = dict(os.environ)
    root = str(paths.ROOT)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = root + (os.pathsep + old if old else "")
    return env


def cmd_test(args):
    asks_help = any(a in ("-h", "--help") for a in args.pytest_args)
    missing = paths.missing_images()
    if missing and not asks_help:
        if os.environ.get(paths.KERNEL_ENV):
            paths.check_images()         # one line naming the kernel
        say(f"dcblab test: building what is missing ({', '.join(missing)}): "
            f"make -C {paths.ROOT} kernel image, BUILD={paths.build_dir()} "
            "(about 10 min the first time)")
        env = dict(os.environ, BUILD=str(paths.build_dir()))
        rc = subprocess.call(["make", "-C", str(paths.ROOT), "-s", "kernel",
                              "image"], env=env)
        if rc != 0:
            raise DcblabError(f"test: `make kernel image` failed (exit {rc})")
    return subprocess.call(pytest_argv(args.pytest_args), env=_env())
