"""`dcblab test`: pytest on your own lab tests, from any directory, with
dcblab's plugin (docs/writing-tests.md)."""

import os
import subprocess
import sys
from pathlib import Path

from ..build.variants import kernel_with
from ..core import paths
from ..core.errors import DcblabError, UsageError
from ..core.flavours import flavour
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


def _take(args, option):
    """(value of option in args or None, args without it): --opt V or
    --opt=V, the last one given."""
    value, rest, it = None, [], iter(args)
    for a in it:
        if a == option:
            value = next(it, None)
            if value is None:
                raise UsageError(f"test: {option} needs a value")
        elif a.startswith(option + "="):
            value = a.split("=", 1)[1]
        else:
            rest.append(a)
    return value, rest


def _build(targets, env):
    say(f"dcblab test: building what is missing: make -C {paths.ROOT} "
        f"{' '.join(targets)}, BUILD={paths.build_dir()} (about 10 min the "
        "first time)")
    rc = subprocess.call(["make", "-C", str(paths.ROOT), "-s", *targets],
                         env=dict(env, BUILD=str(paths.build_dir())))
    if rc != 0:
        raise DcblabError(f"test: `make {' '.join(targets)}` failed "
                          f"(exit {rc})")


def cmd_test(args):
    pytest_args = list(args.pytest_args)
    asks_help = any(a in ("-h", "--help") for a in pytest_args)
    patches, pytest_args = _take(pytest_args, "--dcblab-patches")
    env = _env()
    given_kernel = any(a == "--dcblab-kernel" or
                       a.startswith("--dcblab-kernel=") for a in pytest_args)
    if patches and given_kernel:
        raise UsageError("test: --dcblab-patches DIR or --dcblab-kernel "
                         "BZIMAGE, not both")
    if asks_help:
        return subprocess.call(pytest_argv(pytest_args), env=env)
    own_kernel = patches or given_kernel or os.environ.get(paths.KERNEL_ENV)
    if own_kernel:
        if not paths.initramfs().is_file():
            _build(["image"], env)
    elif paths.missing_images():
        _build(["kernel", "image"], env)
    if patches:
        say(f"dcblab test: the series plus {patches} (docs/own-kernel.md)")
        bzimage, _ = kernel_with(Path(patches).resolve(), flavour().name)
        env[paths.KERNEL_ENV] = str(bzimage)
    return subprocess.call(pytest_argv(pytest_args), env=env)
