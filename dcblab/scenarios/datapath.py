"""The data path's yardstick: the kernel's own packet generator (pktgen)
on the link the traffic tools use, so that `make bench` can say how
close priosend -> priosink comes to what the guests' kernels and the
wire can carry at all.

pktgen builds each frame in the kernel and hands it straight to the
NIC's driver (no socket, no qdisc, no net_prio): per frame it costs the
sender no system call and no stack. The frames are the tools' frames in
every field the path looks at: 802.1Q on the sender's NIC with the VLAN
and PCP the two-cgroup scenario uses, the receiver's VLAN address and
MAC, UDP to priosink's port, the same frame length. What reaches the
receiver is counted by its NIC's rx_packets over pktgen's own run time,
so both figures are "frames the receiver's kernel took per second".
"""

import re
from dataclasses import dataclass

from dcblab.core.errors import DcblabError

__all__ = ["PktgenResult", "pktgen", "frame_len", "PktgenError"]

PGCTRL = "/proc/net/pktgen/pgctrl"
# Ethernet header + 802.1Q tag + IPv4 + UDP, before priosend's payload.
HEADERS = 14 + 4 + 20 + 8


class PktgenError(DcblabError):
    """pktgen could not run or reported no result."""


@dataclass(frozen=True)
class PktgenResult:
    sent: int            # pktgen's count of frames handed to the driver
    seconds: float       # pktgen's run time (its Result line)
    received: int        # receiver NIC's rx_packets over the run
    threads: int

    @property
    def sent_rate(self):
        return self.sent / self.seconds if self.seconds else 0.0

    @property
    def rate(self):
        """Frames per second the receiver's kernel took."""
        return self.received / self.seconds if self.seconds else 0.0


def frame_len(payload):
    """The tagged frame (no FCS) priosend sends for a UDP payload size."""
    return HEADERS + payload


def _script(dev, threads, count, size, dst, dst_mac, port, vlan, pcp,
            delay_ns):
    """sh for the sender: one pktgen thread per CPU in threads, each on its
    own TX queue of dev, count frames each, started together (pgctrl's
    start returns when all are done), then every device's result."""
    lines = []
    for cpu in range(threads):
        ctl = f"/proc/net/pktgen/kpktgend_{cpu}"
        name = f"{dev}@{cpu}"
        p = f"/proc/net/pktgen/{name}"
        lines += [f"echo rem_device_all > {ctl}",
                  f"echo add_device {name} > {ctl}"]
        lines += [f"echo '{c}' > {p}" for c in (
            f"count {count}", f"pkt_size {size}", f"delay {delay_ns}",
            "clone_skb 0",
            f"queue_map_min {cpu}", f"queue_map_max {cpu}",
            f"dst_min {dst}", f"dst_max {dst}", f"dst_mac {dst_mac}",
            f"udp_dst_min {port}", f"udp_dst_max {port}",
            f"vlan_id {vlan}", f"vlan_p {pcp}")]
    lines.append(f"echo start > {PGCTRL}")
    for cpu in range(threads):
        lines.append(f"echo ==; cat /proc/net/pktgen/{dev}@{cpu}")
    for cpu in range(threads):
        lines.append(f"echo rem_device_all > /proc/net/pktgen/kpktgend_{cpu}")
    return "\n".join(lines) + "\n"


# "Result: OK: 2153312(c2153081+d230) usec, 100000 (110byte,0frags)"
RESULT = re.compile(r"Result: OK: (\d+)\(c\d+\+d\d+\) usec, (\d+) \(")


def parse_results(text):
    """[(usec, frames)] of each device's Result line, in order; a device
    without an OK result raises PktgenError with its line."""
    out = []
    for block in text.split("==")[1:]:
        m = RESULT.search(block)
        if not m:
            bad = next((ln.strip() for ln in block.splitlines()
                        if "Result" in ln), "no Result line")
            raise PktgenError(f"pktgen: {bad}")
        out.append((int(m.group(1)), int(m.group(2))))
    if not out:
        raise PktgenError("pktgen printed no device result")
    return out


def _rx_packets(guest, dev):
    return int(guest.read(f"/sys/class/net/{dev}/statistics/rx_packets"))


def pktgen(tx, rx, *, tx_dev, rx_dev, dst, dst_mac, count, payload=64,
           port=9000, vlan=100, pcp=5, threads=1, delay_ns=0, timeout=300):
    """Run pktgen on guest tx towards rx (count frames per thread, UDP
    payload bytes as priosend's --size, delay_ns between a thread's
    frames, 0: as fast as the driver takes them), count what rx's NIC
    received.
    The receiver's count includes anything else it got meanwhile (an idle
    lab's LLDP and neighbour traffic: a few frames)."""
    before = _rx_packets(rx, rx_dev)
    script = _script(tx_dev, threads, count, frame_len(payload), dst,
                     dst_mac, port, vlan, pcp, delay_ns)
    out = tx.run(["sh", "-c", script], timeout=timeout)
    after = _rx_packets(rx, rx_dev)
    results = parse_results(out.stdout)
    # The threads started together: the run lasts as long as the longest.
    seconds = max(us for us, _ in results) / 1e6
    return PktgenResult(sent=sum(n for _, n in results), seconds=seconds,
                        received=after - before, threads=len(results))
