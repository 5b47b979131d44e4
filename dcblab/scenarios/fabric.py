"""The DCB fabric's measurements (topology/dcb-fabric.toml): senders on
h1 and h2 load sw's congested port toward h3 with several priorities at
once; h3 counts what arrives per PCP over time (priosink --interval).
Used by tests/test_fabric.py, ``dcblab demo`` and ``dcblab bench``.

Expected numbers come from the topology file: the congested port is the
switch port with a ``rate``; its DCB configuration gives each ETS class's
share. Among the ETS classes that are backlogged (offered more than
they get), DRR divides what the strict classes leave in proportion to
the bandwidth shares: with all three ETS classes loaded, 20/30/50 of the
port.

Load: each class is offered ``load`` times the port's line rate in
total (split over the senders), so every class is backlogged, but the
sum stays below what sw forwards under TCG (``dcblab bench`` measures
it): frames must die at the ETS scheduler's queues, not at sw's ingress.
"""

import json
import re
import threading
import time
from dataclasses import dataclass, field

from ..core.cmd import run
from ..lab.wire import Wire
from ..testing.traffic import Sink, send

__all__ = ["congested_port", "class_stats", "wire_bytes", "Flow", "SharesResult",
           "offer", "expected_shares", "SIZE", "SINK_PORT"]

SIZE = 1400                      # UDP payload bytes of every test frame
SINK_PORT = 9000
VLAN = 100
INTERVAL_MS = 250
DEV = "eth0"


def wire_bytes(size=SIZE):
    """A frame's bytes as priosink counts them (802.1Q tag, no FCS)."""
    return size + 8 + 20 + 14 + 4


def congested_port(topology):
    """(switch, port Nic, receiving host) of the fabric's shaped port."""
    for sw in topology.switches:
        for port in sw.nics:
            if port.rate_bps:
                return sw, port, port.peer.split(":")[0]
    raise ValueError(f"{topology.path}: no switch port has a rate")


def expected_shares(dcb, pcps):
    """{pcp: share 0..1} the ETS scheduler gives backlogged pcps (each in
    an ETS class; several pcps in one class split that class's share
    by what they are offered, so give one pcp per class)."""
    tcs = {p: dcb.prio_tc[p] for p in set(pcps)}
    total = sum(dcb.bw[tc] for tc in set(tcs.values()))
    return {p: dcb.bw[tc] / total for p, tc in tcs.items()}


@dataclass
class Flow:
    host: str
    pcp: int
    flow: int
    rate: int                   # frames/s offered
    sent: int = 0
    received: int = 0
    wrong_pcp: int = 0


@dataclass
class SharesResult:
    rate_bps: int
    size: int
    seconds: float
    steady: tuple               # (from_s, to_s) of the steady interval
    flows: list
    intervals: list             # priosink's, as it printed them
    expected: dict              # {pcp: share}
    got_bps: dict = field(default_factory=dict)   # {pcp: bit/s, steady}
    qdisc: dict = field(default_factory=dict)     # sw port's classes
    # The port's throughput over the steady interval by the host's clock:
    # bytes leaving sw toward h3, read on the wire (the tap in the lab's
    # netns) at host times. The guests' clocks run slow under load
    # (docs/fabric.md, "Clocks"), so absolute rates come from here; the
    # per-PCP shares are ratios within priosink's intervals, which one
    # clock's error does not change.
    wire_bps: float = 0.0
    sink_drops: int = 0          # frames h3's kernel dropped at priosink

    @property
    def total_bps(self):
        return sum(self.got_bps.values())

    def share(self, pcp):
        return self.got_bps.get(pcp, 0) / self.total_bps if self.total_bps \
            else 0.0

    @property
    def wrong_pcp(self):
        return sum(f.wrong_pcp for f in self.flows)

    def as_json(self):
        return {"rate_bps": self.rate_bps, "size": self.size,
                "seconds": self.seconds, "steady": list(self.steady),
                "expected": {str(p): s for p, s in self.expected.items()},
                "got_bps": {str(p): b for p, b in self.got_bps.items()},
                "flows": [vars(f) for f in self.flows],
                "intervals": self.intervals, "qdisc": self.qdisc,
                "sink_drops": self.sink_drops, "wire_bps": self.wire_bps}


_CLASS = re.compile(r"class (\S+) (\S+) .*\n Sent (\d+) bytes (\d+) pkt "
                    r"\(dropped (\d+), overlimits \d+ requeues \d+\) *\n"
                    r" backlog (\d+)b (\d+)p")


def class_stats(guest, dev):
    """{classid: {kind, bytes, packets, drops, backlog_bytes,
    backlog_packets}} of dev's classes (`tc -s class show`: iproute2 6.1
    prints no JSON for classes)."""
    out = guest.run(["tc", "-s", "class", "show", "dev", dev]).stdout
    return {m[2]: dict(kind=m[1], bytes=int(m[3]), packets=int(m[4]),
                       drops=int(m[5]), backlog_bytes=int(m[6]),
                       backlog_packets=int(m[7]))
            for m in _CLASS.finditer(out)}


class _WireSampler(threading.Thread):
    """Reads the TX bytes of rx's tap (frames from its switch port) at two
    host times, from the senders' start: the steady interval's ends."""

    def __init__(self, lab, rx, steady):
        super().__init__(daemon=True)
        self.ns = lab.wire.netns
        self.tap = Wire.tap(lab.topology.host(rx).nics[0])
        self.steady = steady
        self.samples = []

    def read(self):
        out = run(["ip", "-n", self.ns, "-s", "-j", "link", "show", "dev",
                   self.tap]).stdout
        return time.monotonic(), json.loads(out)[0]["stats64"]["tx"]["bytes"]

    def run(self):
        t0 = time.monotonic()
        for at in self.steady:
            time.sleep(max(0.0, t0 + at - time.monotonic()))
            self.samples.append(self.read())

    def bps(self):
        self.join()
        (t1, b1), (t2, b2) = self.samples
        return (b2 - b1) * 8 / (t2 - t1)


def offer(lab, pcps, *, load=1.2, seconds=8.0, warmup=2.0, senders=("h1",
          "h2"), size=SIZE, on_interval=None):
    """Every pcp offered load x line rate (split over senders; a pcp given
    n times is n flows from each sender, n x the load) for
    seconds; h3's per-PCP throughput over the steady interval (warmup
    seconds in, until 0.5 s before the senders stop)."""
    topo = lab.topology
    sw, port, rx = congested_port(topo)
    line_fps = port.rate_bps / (8 * wire_bytes(size))
    dst = topo.address(rx, vlan=VLAN)
    flows = []
    for i, host in enumerate(senders):
        for j, pcp in enumerate(pcps):
            flows.append(Flow(host, pcp, flow=100 * (i + 1) + j,
                              rate=max(1, round(load * line_fps
                                                / len(senders)))))
    rxg = lab.guest(rx)
    for f in flows:   # ARP resolved before the load (see traffic_classes)
        lab.guest(f.host).run(["ping", "-c", "1", "-W", "2", dst])
    sink = Sink(rxg, DEV, timeout=seconds + 6, idle=2.0,
                extra=["--interval", str(INTERVAL_MS), "-p",
                       str(SINK_PORT)])
    sampler = _WireSampler(lab, rx, (warmup, seconds - 0.5))
    procs = [(f, send(lab.guest(f.host), dst, spawn=True, rate=f.rate,
                      count=int(f.rate * seconds), size=size, flow=f.flow,
                      so_priority=f.pcp, port=SINK_PORT))
             for f in flows]
    sampler.start()
    for f, p in procs:
        res = lab.guest(f.host).wait(p, timeout=seconds + 60)
        f.sent = json.loads(res.stdout)["sent"]
    got = sink.result()
    for f in flows:
        entry = next((x for x in got["flows"] if x["flow"] == f.flow), None)
        if entry:
            f.received = entry["received"]
            f.wrong_pcp = f.received - entry["pcp"][f.pcp]
    steady = (warmup, seconds - 0.5)
    ivs = got.get("intervals", [])
    span = [iv for iv in ivs
            if iv["t_s"] >= steady[0] and iv["t_s"] + iv["len_s"] <= steady[1]]
    secs = sum(iv["len_s"] for iv in span)
    result = SharesResult(port.rate_bps, size, seconds, steady, flows, ivs,
                          expected_shares(port.dcb, pcps))
    for p in sorted(set(pcps)):
        result.got_bps[p] = (sum(iv["pcp_bytes"][p] for iv in span) * 8
                             / secs if secs else 0.0)
    result.sink_drops = got.get("socket_drops", 0)
    result.wire_bps = sampler.bps()
    result.qdisc = class_stats(lab.guest(sw.name), port.name)
    return result
