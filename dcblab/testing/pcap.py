"""Reading the frames of a pcap file (as tcpdump -w writes it)."""

import struct

from ..core.errors import DcblabError

__all__ = ["PcapError", "read_frames", "vlan_tag"]


class PcapError(DcblabError):
    """A file is not a classic Ethernet pcap."""


def read_frames(path):
    """Frames (bytes) of a classic pcap file with Ethernet link type."""
    data = open(path, "rb").read()
    if len(data) < 24:
        return []
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise PcapError(f"{path}: not a pcap file (magic {magic.hex()})")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    if linktype != 1:
        raise PcapError(f"{path}: link type {linktype}, not Ethernet")
    frames, off = [], 24
    while off + 16 <= len(data):
        incl = struct.unpack(endian + "I", data[off + 8:off + 12])[0]
        frames.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return frames


def vlan_tag(frame):
    """(vid, pcp, inner ethertype) of an 802.1Q frame, else None."""
    if len(frame) < 18 or frame[12:14] != b"\x81\x00":
        return None
    tci = struct.unpack("!H", frame[14:16])[0]
    inner = struct.unpack("!H", frame[16:18])[0]
    return tci & 0x0FFF, tci >> 13, inner
