"""What a bzImage says about itself, read from the file (no boot).

Its version string sits in the setup header; its .config, when the kernel
was built with CONFIG_IKCONFIG=y, sits gzipped behind the marker
``IKCFG_ST`` inside the compressed kernel the header points at (the
boot protocol's payload_offset and payload_length, 2.08+). Reading it is
scripts/extract-ikconfig done in this process: decompress the payload,
find the marker, gunzip what follows. Our kernel is LZ4-compressed
(lab.config: CONFIG_KERNEL_LZ4), which Python's standard library does not
read, so the LZ4 legacy format the kernel uses is decoded here; gzip, xz,
lzma and bzip2 payloads go to the standard modules.

``missing_options(bzimage)`` compares that config with what the labs
need: the options the flavour's fragments (kernel-patches/lab.config, and
debug.config for FLAVOUR=debug) set to y, each with its fragment comment
saying what needs it, less BUILD_ONLY.
"""

import bz2
import functools
import lzma
import os
import re
import struct
import zlib

from . import paths
from .errors import DcblabError
from .flavours import flavour

__all__ = ["bzimage_version", "runs_build", "embedded_config",
           "needed_options", "missing_options",
           "BzImageError", "BUILD_ONLY", "MARKER"]

MARKER = b"IKCFG_ST"
# Options of the fragments that say how our kernel is built, not what a
# lab needs from a kernel built elsewhere.
BUILD_ONLY = {
    "CONFIG_KERNEL_LZ4": "any compression its bootloader unpacks will do",
    "CONFIG_NO_HZ_IDLE": "a periodic tick works too; its idle guests "
                         "only cost the host more CPU",
}

_GZIP_MAGIC = b"\x1f\x8b\x08"
_LZ4_LEGACY = b"\x02\x21\x4c\x18"
_FRAGMENT_LINE = re.compile(r"^(CONFIG_\w+)=y\s*(?:#\s*(.*))?$")


class BzImageError(DcblabError):
    """A file is not a bzImage this module can read."""


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


def _payload(data, path):
    """The compressed kernel inside a bzImage's bytes."""
    if len(data) < 0x250 or data[0x202:0x206] != b"HdrS":
        raise BzImageError(f"{path}: not a bzImage (no HdrS setup header)")
    (version,) = struct.unpack_from("<H", data, 0x206)
    if version < 0x208:
        raise BzImageError(f"{path}: boot protocol {version >> 8}."
                           f"{version & 0xff} has no payload pointer "
                           "(2.08+ has)")
    setup_sects = data[0x1F1] or 4
    offset, length = struct.unpack_from("<II", data, 0x248)
    start = (setup_sects + 1) * 512 + offset
    return data[start:start + length]


def _lz4_length(src, i, n):
    """A length of a token's nibble n, bytes of 255 at src[i] adding to
    it when n is 15 (and the first byte that is not 255): (length, the
    index after it)."""
    if n == 15:
        while True:
            b = src[i]
            i += 1
            n += b
            if b != 255:
                break
    return n, i


def _lz4_block(src, out):
    """One LZ4 block appended to out (the block format: sequences of a
    token, literals, a 2-byte offset and a match length)."""
    i, n = 0, len(src)
    while i < n:
        token = src[i]
        i += 1
        lit, i = _lz4_length(src, i, token >> 4)
        out += src[i:i + lit]
        i += lit
        if i >= n:
            break           # the last sequence has literals only
        off = src[i] | src[i + 1] << 8
        i += 2
        mlen, i = _lz4_length(src, i, token & 15)
        mlen += 4
        start = len(out) - off
        if off >= mlen:
            out += out[start:start + mlen]
        else:               # overlapping: the last off bytes repeat
            chunk = out[start:]
            out += (chunk * (mlen // off + 1))[:mlen]


def _lz4_legacy(data):
    """The LZ4 legacy stream the kernel's build writes (magic, then
    blocks each behind its little-endian compressed size)."""
    out = bytearray()
    i = 4
    while i + 4 <= len(data):
        (size,) = struct.unpack_from("<I", data, i)
        if size == struct.unpack("<I", _LZ4_LEGACY)[0]:
            i += 4          # a second stream, concatenated
            continue
        if size == 0 or i + 4 + size > len(data):
            break           # the build's appended kernel size, or the end
        _lz4_block(data[i + 4:i + 4 + size], out)
        i += 4 + size
    return bytes(out)


def _decompress(payload):
    """(compression name, the kernel it holds), or (name, None) for a
    compression read nowhere here."""
    if payload.startswith(_GZIP_MAGIC):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return "gzip", d.decompress(payload)
    if payload.startswith(b"\xfd7zXZ\x00"):
        return "xz", lzma.LZMADecompressor(lzma.FORMAT_XZ).decompress(payload)
    if payload.startswith(b"\x5d\x00\x00"):
        return "lzma", lzma.LZMADecompressor(
            lzma.FORMAT_ALONE).decompress(payload)
    if payload.startswith(b"BZh"):
        return "bzip2", bz2.BZ2Decompressor().decompress(payload)
    if payload.startswith(_LZ4_LEGACY):
        return "lz4", _lz4_legacy(payload)
    if payload.startswith(b"\x28\xb5\x2f\xfd"):
        return "zstd", None
    if payload.startswith(b"\x89LZO"):
        return "lzo", None
    return "unknown", None


def _config_after_marker(kernel):
    """The gunzipped config behind the first marker in kernel, or None."""
    at = kernel.find(MARKER + _GZIP_MAGIC)
    if at < 0:
        return None
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        return d.decompress(kernel[at + len(MARKER):]).decode(
            errors="replace")
    except zlib.error:
        return None


@functools.lru_cache(maxsize=8)
def _embedded_config(path, size, mtime_ns):
    with open(path, "rb") as f:
        data = f.read()
    # An uncompressed image or object (extract-ikconfig's first try).
    text = _config_after_marker(data)
    if text is not None:
        return text
    name, kernel = _decompress(_payload(data, path))
    if kernel is None:
        raise BzImageError(f"{path}: its kernel is {name}-compressed, which "
                           "dcblab does not read: build it with "
                           "CONFIG_KERNEL_GZIP, _XZ or _LZ4")
    return _config_after_marker(kernel)


def embedded_config(path):
    """{CONFIG_X: value} of the .config a bzImage embeds
    (CONFIG_IKCONFIG=y), or None when it embeds none."""
    st = os.stat(path)
    text = _embedded_config(str(path), st.st_size, st.st_mtime_ns)
    if text is None:
        return None
    config = {}
    for line in text.splitlines():
        name, eq, value = line.partition("=")
        if eq and name.startswith("CONFIG_"):
            config[name] = value
    return config


def needed_options(flavour_name=None):
    """{CONFIG_X: what needs it}: the options the flavour's fragments set
    to y (a later fragment's comment wins), less BUILD_ONLY."""
    needed = {}
    for frag in flavour(flavour_name).fragments:
        for line in (paths.PATCH_DIR / frag).read_text().splitlines():
            m = _FRAGMENT_LINE.match(line.strip())
            if m and m.group(1) not in BUILD_ONLY:
                needed[m.group(1)] = (m.group(2) or frag).strip()
    return needed


def missing_options(bzimage, flavour_name=None):
    """What keeps the labs from running on bzimage, one line each:
    each needed option it does not have as y; or, when it embeds no
    config, that one line. [] when it has them all."""
    config = embedded_config(bzimage)
    if config is None:
        return [f"KERNEL: {bzimage} has no embedded config: build it with "
                "CONFIG_IKCONFIG=y so its options can be checked"]
    return [f"KERNEL: {bzimage} lacks {name} (needed for {why})"
            for name, why in needed_options(flavour_name).items()
            if config.get(name) != "y"]
