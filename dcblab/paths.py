"""Where dcblab keeps its inputs and build products.

Everything generated lives under BUILD (default ``build/`` in the checkout,
overridden by the ``BUILD`` environment variable, as in the Makefile).
"""

import os
from pathlib import Path

__all__ = ["ROOT", "build_dir", "kernel_src", "kernel_obj", "bzimage",
           "initramfs", "missing_images", "KERNEL_TARBALL", "PATCH_DIR"]

ROOT = Path(__file__).resolve().parent.parent
PATCH_DIR = ROOT / "kernel-patches"
KERNEL_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")


def build_dir() -> Path:
    return Path(os.environ.get("BUILD") or ROOT / "build").resolve()


def kernel_src() -> Path:
    return build_dir() / "linux-source-6.1"


def kernel_obj() -> Path:
    return build_dir() / "kernel-obj"


def bzimage() -> Path:
    return kernel_obj() / "arch/x86/boot/bzImage"


def initramfs() -> Path:
    return build_dir() / "initramfs.cpio"


def missing_images():
    """The boot images (kernel, initramfs) not built yet, as strings."""
    return [str(p) for p in (bzimage(), initramfs()) if not p.exists()]
