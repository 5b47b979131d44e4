"""Frames on the wire: a capture of a lab's link from the host side, and
reading the frames of a pcap file (as tcpdump -w writes it)."""

from __future__ import annotations

import contextlib
import signal
import struct
import subprocess
from collections.abc import Iterator, Sequence
from os import PathLike
from typing import TYPE_CHECKING, Optional, Union

from ..core.errors import DcblabError

if TYPE_CHECKING:
    from .handle import LabHandle

__all__ = ["PcapError", "capture", "read_frames", "vlan_tag", "ip_dscp"]

# tcpdump's -c for a capture that runs until its block ends.
_NO_COUNT = 2**31 - 1


class PcapError(DcblabError):
    """A file is not a classic Ethernet pcap."""


@contextlib.contextmanager
def capture(lab: LabHandle, link: str, path: Union[str, PathLike], *,
            count: Optional[int] = None, bpf: Sequence[str] = (),
            timeout: float = 10.0) -> Iterator[str]:
    """Record LINK's frames, both directions, into the pcap file path
    while the block runs (tcpdump on the host side of the link, in the
    lab's network namespace: the guests see nothing of it). The block
    starts once tcpdump listens. With count, the block's end waits up to
    timeout seconds for count frames matching the BPF words bpf, then
    stops tcpdump, keeping what it has; without, it stops it at once.
    Yields path as a str, for read_frames()."""
    nic = lab.topology.link(link).a
    # The tap of one end carries both directions: the wire redirects
    # each end's frames to the other end's tap.
    proc = lab.wire.capture(nic, path, count or _NO_COUNT, list(bpf))
    try:
        yield str(path)
        if count:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stderr.close()


def read_frames(path: Union[str, PathLike]) -> list[bytes]:
    """Frames (bytes) of a classic pcap file with Ethernet link type."""
    with open(path, "rb") as f:
        data = f.read()
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


def vlan_tag(frame: bytes) -> Optional[tuple[int, int, int]]:
    """(vid, pcp, inner ethertype) of an 802.1Q frame, else None."""
    if len(frame) < 18 or frame[12:14] != b"\x81\x00":
        return None
    tci = struct.unpack("!H", frame[14:16])[0]
    inner = struct.unpack("!H", frame[16:18])[0]
    return tci & 0x0FFF, tci >> 13, inner


def ip_dscp(frame: bytes) -> Optional[int]:
    """The DSCP of an IPv4 or IPv6 frame, 802.1Q-tagged or not, else
    None."""
    tag = vlan_tag(frame)
    if tag:
        ethertype, ip = tag[2], frame[18:]
    elif len(frame) >= 14:
        ethertype, ip = struct.unpack("!H", frame[12:14])[0], frame[14:]
    else:
        return None
    if ethertype == 0x0800 and len(ip) >= 2 and ip[0] >> 4 == 4:
        return ip[1] >> 2
    if ethertype == 0x86DD and len(ip) >= 2 and ip[0] >> 4 == 6:
        return ((ip[0] & 0x0F) << 2) | (ip[1] >> 6)
    return None
