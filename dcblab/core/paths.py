"""Where dcblab keeps its inputs and build products.

Everything generated lives under BUILD (default ``build/`` in the checkout,
overridden by the ``BUILD`` environment variable, as in the Makefile).
The kernel source tree is shared by all flavours; each flavour has its own
object directory (``kernel-obj`` for ``lab``, ``kernel-obj-NAME`` for the
others), so switching flavour never rebuilds the other one.

Two environment variables point elsewhere: ``DCBLAB_KERNEL`` (a bzImage
labs boot instead of the flavour's; ``make bench`` boots the series-minus-
one kernels with it, ``make test PATCHES=`` or ``KERNEL=`` your own; its
embedded config is checked first, check_images) and ``DCBLAB_PATCH_DIR``
(the patch directory a build reads instead of ``kernel-patches/``; those
kernels' builds use it).
"""

import contextlib
import os
from pathlib import Path

from .errors import DcblabError
from .flavours import DEFAULT, flavour

__all__ = ["ROOT", "build_dir", "kernel_src", "kernel_obj", "bzimage",
           "boot_kernel", "KERNEL_ENV", "initramfs", "missing_images",
           "check_images", "check_kernel", "MissingImages", "UnfitKernel",
           "default_topology",
           "KERNEL_TARBALL", "PATCH_DIR", "TOPOLOGY_DIR", "suite_times"]

ROOT = Path(__file__).resolve().parent.parent.parent
PATCH_DIR = Path(os.environ.get("DCBLAB_PATCH_DIR")
                 or ROOT / "kernel-patches").resolve()
KERNEL_ENV = "DCBLAB_KERNEL"
TOPOLOGY_DIR = ROOT / "topology"
KERNEL_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")


def build_dir() -> Path:
    return Path(os.environ.get("BUILD") or ROOT / "build").resolve()


def kernel_src() -> Path:
    return build_dir() / "linux-source-6.1"


def kernel_obj(flavour_name=None) -> Path:
    name = flavour(flavour_name).name
    suffix = "" if name == DEFAULT else f"-{name}"
    return build_dir() / f"kernel-obj{suffix}"


def bzimage(flavour_name=None) -> Path:
    return kernel_obj(flavour_name) / "arch/x86/boot/bzImage"


def boot_kernel(flavour_name=None) -> Path:
    """The bzImage labs boot: $DCBLAB_KERNEL if set, else the flavour's."""
    given = os.environ.get(KERNEL_ENV)
    return Path(given).resolve() if given else bzimage(flavour_name)


@contextlib.contextmanager
def kernel_env(kernel):
    """DCBLAB_KERNEL set to kernel (a bzImage; nothing when None) for the
    block, then as it was: a lab's keeper started meanwhile boots every
    guest from it."""
    saved = os.environ.get(KERNEL_ENV)
    if kernel:
        os.environ[KERNEL_ENV] = str(kernel)
    try:
        yield
    finally:
        if kernel:
            if saved is None:
                os.environ.pop(KERNEL_ENV, None)
            else:
                os.environ[KERNEL_ENV] = saved


def tools_dir() -> Path:
    """The built C tools (make image), the host-side tsc-khz among them."""
    return build_dir() / "tools"


def suite_times() -> Path:
    """Seconds per test file of the last pytest session (its plugin
    writes it; make bench reads it)."""
    return build_dir() / "last-pytest-times.json"


def initramfs() -> Path:
    return build_dir() / "initramfs.cpio"


def default_topology() -> Path:
    """The lab every command, fixture and demo uses unless told otherwise."""
    return TOPOLOGY_DIR / "two-hosts.toml"


class MissingImages(DcblabError):
    """A boot image (kernel or initramfs) has not been built."""


class UnfitKernel(MissingImages):
    """$DCBLAB_KERNEL lacks an option the labs need, or its options cannot
    be read (bzimage.missing_options)."""


def missing_images(flavour_name=None):
    """The boot images (kernel, initramfs) not built yet, as strings."""
    return [str(p) for p in (boot_kernel(flavour_name), initramfs())
            if not p.is_file()]


def check_images(flavour_name=None):
    """Raise MissingImages, saying what to run, unless both are built."""
    missing = missing_images(flavour_name)
    if missing:
        if os.environ.get(KERNEL_ENV):
            raise MissingImages(f"missing {', '.join(missing)} "
                                f"({KERNEL_ENV} names the kernel)")
        name = flavour(flavour_name).name
        how = "" if name == DEFAULT else f" FLAVOUR={name}"
        raise MissingImages(f"missing {', '.join(missing)}: run `make kernel "
                            f"image{how}` (or `make test{how}`, which builds "
                            "them)")
    if os.environ.get(KERNEL_ENV):
        check_kernel(boot_kernel(flavour_name), flavour_name)


def check_kernel(kernel, flavour_name=None):
    """Raise UnfitKernel, one line per missing option, unless kernel (a
    bzImage built elsewhere) has every option the labs need in its
    embedded .config (bzimage reads this module: imported here)."""
    from .bzimage import BzImageError, missing_options
    try:
        lacks = missing_options(kernel, flavour_name)
    except BzImageError as e:
        lacks = [f"KERNEL: {e}"]
    if lacks:
        raise UnfitKernel("\n".join(lacks))
