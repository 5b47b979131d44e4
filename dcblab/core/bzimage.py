"""What a bzImage says about itself, read from the file (no boot)."""

import struct

__all__ = ["bzimage_version", "runs_build"]


def bzimage_version(path):
    """The version string a bzImage carries (the boot protocol's
    kernel_version, at the offset its setup header gives at 0x20E):
    release, builder, and the build's number and time."""
    with open(path, "rb") as f:
        head = f.read(0x210)
        (offset,) = struct.unpack_from("<H", head, 0x20E)
        f.seek(offset + 0x200)
        return f.read(256).split(b"\0", 1)[0].decode(errors="replace")


def runs_build(proc_version, path):
    """Whether a guest's /proc/version is the build of the bzImage at
    path: the same release and the same build number and time."""
    release, _, build = bzimage_version(path).partition(" ")
    stamp = build.partition(" #")[2]
    return f"version {release} " in proc_version and f"#{stamp}" in \
        proc_version
