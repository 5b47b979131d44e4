"""What the build steps share: their errors, progress lines and digests."""

import hashlib
import time
from pathlib import Path

from dcblab.core import paths
from dcblab.core.errors import DcblabError

__all__ = ["BuildError", "ConfigMismatch", "say", "Step", "file_sha256",
           "tarball_id"]


class BuildError(DcblabError):
    """A build step failed; the message says which and what to do."""


class ConfigMismatch(BuildError):
    """Kconfig did not keep options a fragment asked for."""


def say(msg):
    print(f"dcblab: {msg}", flush=True)


class Step:
    """Prints a step's start and, on success, its duration."""

    def __init__(self, name):
        self.name = name
        self.t0 = None

    def __enter__(self):
        self.t0 = time.monotonic()
        say(f"{self.name} ...")
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            say(f"{self.name} done in {time.monotonic() - self.t0:.1f}s")
        return False


def file_sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def tarball_id():
    """Size and mtime of the kernel tarball: a new Debian upload changes it."""
    try:
        st = paths.KERNEL_TARBALL.stat()
    except FileNotFoundError:
        raise BuildError(f"{paths.KERNEL_TARBALL} is missing: run `make deps` "
                         "(Debian package linux-source-6.1)") from None
    return f"{st.st_size}:{int(st.st_mtime)}"
