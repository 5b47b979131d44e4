"""The least memory a guest boots in, derived from the boot image's files.

A guest's root filesystem is the initramfs unpacked into a tmpfs (the
kernel mounts its rootfs as tmpfs when no root= is given), and a tmpfs
may hold at most half of the RAM the kernel counts when it is mounted.
That is early in boot: the initramfs the boot loader loaded still
occupies RAM, and so do the kernel's image and its memmap (a 64-byte
struct page per 4 KiB page: 1/64 of the RAM). So the unpacked files must
fit in half of what is left beside them:

    unpacked <= (memory - memory / 64 - kernel - initramfs) / 2
    memory   >= (kernel + initramfs + 2 * unpacked) * 64 / 63 (+ MARGIN_MIB)

kernel is the bzImage's ``init_size`` (boot protocol header: the linear
memory the kernel needs from its load address, bss and early page tables
included); initramfs the archive's size; unpacked its regular files, each
rounded up to whole pages as a tmpfs stores them. Below the bound the
kernel prints "Initramfs unpacking failed: write error" and init runs
without the files that did not fit (the agent may still answer: the
files cut off are the archive's last).

Measured with the lab kernel (init_size 16.3 MiB) under TCG, 1 vCPU: the
rootfs's size= (/proc/mounts) says the kernel counted memory - 17.6 MiB
- initramfs at 116 and at 128 MiB, with initramfs archives of 1.9 and
21.9 MiB; the formula counts 18.2 MiB (init_size and memmap) there. Each
further vCPU costs about 0.2 MiB (per-CPU areas; MemTotal at 8 vCPUs is
1.35 MiB below 1). With an initramfs of 34.2 MiB (34.4 MiB of files):
120 MiB failed and 121 booted with 1 vCPU, 121 failed and 122 booted with
8; the formula gives 121.2, so 122. MARGIN_MIB covers what it does not
count (per-CPU areas, hash tables sized by RAM) for kernels whose early
allocations grow. Each MiB the initramfs grows by raises the bound by 3
MiB.

The debug flavour's KASAN also takes one eighth of the RAM early, which
this does not count: its own floor (flavours.py, 512 MiB) lies far above.
``check_memory()`` runs at `up`, before anything is started.
"""

import gzip
import math
import struct
from dataclasses import dataclass
from pathlib import Path

from ..core import paths
from ..core.errors import DcblabError
from ..topology import TopologyError, quote

__all__ = ["MARGIN_MIB", "ImageFloor", "ImageError", "image_floor",
           "check_memory", "initramfs_unpacked", "kernel_init_size"]

MARGIN_MIB = 4
MIB = 1 << 20
_PAGE = 4096
# x86 boot protocol (Documentation/x86/boot.rst): the header's magic at
# 0x202, its version at 0x206, init_size (protocol 2.10 and later) at 0x260.
_HDR_MAGIC, _HDR_VERSION, _INIT_SIZE = 0x202, 0x206, 0x260
_NEWC = (b"070701", b"070702")
_NEWC_HEADER = 110
_S_IFMT, _S_IFREG = 0o170000, 0o100000


@dataclass(frozen=True)
class ImageFloor:
    """What a guest booting kernel + initramfs needs, in bytes, and the
    bound in MiB (rounded up, margin included)."""
    kernel: int
    initramfs: int
    unpacked: int
    margin_mib: int = MARGIN_MIB

    @property
    def mib(self) -> int:
        need = (self.kernel + self.initramfs + 2 * self.unpacked) * 64 / 63
        return math.ceil(need / MIB) + self.margin_mib

    def why(self) -> str:
        return (f"the initramfs ({self.initramfs / MIB:.1f} MiB, "
                f"{self.unpacked / MIB:.1f} MiB unpacked) is unpacked into "
                "a tmpfs of at most half the RAM left beside it, the "
                f"kernel ({self.kernel / MIB:.1f} MiB) and its memmap "
                f"(1/64), plus {self.margin_mib} MiB of margin")


class ImageError(DcblabError):
    """A boot image this module cannot read."""


def kernel_init_size(path) -> int:
    """The bzImage's init_size, in bytes."""
    with open(path, "rb") as f:
        head = f.read(_INIT_SIZE + 4)
    if len(head) < _INIT_SIZE + 4 or \
            head[_HDR_MAGIC:_HDR_MAGIC + 4] != b"HdrS":
        raise ImageError(f"{path}: not a bzImage (no boot protocol header)")
    (version,) = struct.unpack_from("<H", head, _HDR_VERSION)
    if version < 0x20a:
        raise ImageError(f"{path}: boot protocol {version >> 8}."
                         f"{version & 0xff} has no init_size (2.10 and "
                         "later do)")
    return struct.unpack_from("<I", head, _INIT_SIZE)[0]


def initramfs_unpacked(path) -> int:
    """Bytes the initramfs's regular files take in a tmpfs: each rounded
    up to whole pages. Reads newc cpio archives (one after another, as
    the kernel takes them), plain or gzip-compressed."""
    with open(path, "rb") as raw:
        magic = raw.read(2)
        raw.seek(0)
        if magic == b"\x1f\x8b":
            with gzip.open(raw) as f:
                return _newc_pages(f, path)
        return _newc_pages(raw, path)


def _newc_pages(f, path) -> int:
    total = 0
    while True:
        head = _next_header(f)
        if head is None:
            return total
        if head[:6] not in _NEWC or len(head) < _NEWC_HEADER:
            raise ImageError(f"{path}: not a newc cpio archive (plain or "
                             "gzip): cannot tell how much it unpacks to")
        mode = int(head[14:22], 16)
        size = int(head[54:62], 16)
        namesize = int(head[94:102], 16)
        _skip(f, namesize + (-(_NEWC_HEADER + namesize)) % 4, path)
        if mode & _S_IFMT == _S_IFREG:
            total += -(-size // _PAGE) * _PAGE
        _skip(f, size + (-size) % 4, path)


def _next_header(f):
    """The next entry's header, past the NUL padding that may end an
    archive or sit between two (initramfs.rst); None at the end."""
    b = f.read(1)
    while b == b"\0":
        b = f.read(1)
    if not b:
        return None
    return b + f.read(_NEWC_HEADER - 1)


def _skip(f, n, path):
    if n and len(f.read(n)) != n:
        raise ImageError(f"{path}: the archive ends in the middle of an "
                         "entry")


def image_floor(kernel, initramfs) -> ImageFloor:
    return ImageFloor(kernel_init_size(kernel), Path(initramfs).stat().st_size,
                      initramfs_unpacked(initramfs))


def check_memory(topology, the_flavour):
    """TopologyError, one line per machine, for every host and switch
    whose memory is below what the flavour's boot image boots in (after
    the flavour's own floor, which the guest gets anyway)."""
    floor = image_floor(paths.boot_kernel(the_flavour.name),
                        paths.initramfs())
    lines = []
    for h in topology.hosts:
        mem = max(h.memory_mib, the_flavour.min_memory_mib)
        if mem < floor.mib:
            what = "switch" if h.is_switch else "host"
            lines.append(f"{topology.path}: {what} {quote(h.name)}: "
                         f"memory_mib must be at least {floor.mib} for "
                         f"this boot image, got {h.memory_mib}: "
                         f"{floor.why()}")
    if lines:
        raise TopologyError("\n".join(lines))
    return floor
