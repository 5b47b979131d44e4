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

import contextlib
import json
import re
import threading
import time
from dataclasses import dataclass, field

from ..lab.switch import tbf_burst
from ..lab.wire import Wire
from ..lab import start_dcbapp, stop_dcbapp
from ..testing.dcb import wait_for
from ..testing.traffic import NETPRIO, Sink, cgroup, map_priority, send
from .dcbx import CHAIN_CGROUP, ROCE_PORT, chain_ifpriomap

# pfcd's counters on a switch (tools/pfcd.c --state).
PFCD_STATE = "/run/pfcd.json"

__all__ = ["congested_port", "class_stats", "parse_class_stats", "strict_priority", "cgroup_apps",
           "queue_delay_s", "idle_rtt", "BULK_CGROUP", "wire_bytes", "Flow", "SharesResult",
           "offer", "expected_shares", "SIZE", "SINK_PORT",
           "pinned_neighbours"]

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
    # Sent from this net_prio cgroup, without SO_PRIORITY: pcp is then
    # what the cgroup's map should give (an unmodified application).
    cgroup: str = ""
    count: int = 0              # frames to send; 0: rate x seconds
    retries: int = 0            # sends priosend retried (ENOBUFS)
    elapsed: float = 0.0        # s priosend took


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
    rtt: list = field(default_factory=list)       # probes, see _Probes
    # With PFC: how much of each stretch of time each port of the switch
    # kept its partner paused, see _PauseSampler.
    pause: dict = field(default_factory=dict)

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
                "sink_drops": self.sink_drops, "wire_bps": self.wire_bps,
                **({"rtt": self.rtt} if self.rtt else {}),
                **({"pause": self.pause} if self.pause else {})}


# tc prints a backlog within 16 bytes of a multiple of 1024 in Kb (and of
# 1 MiB in Mb): "backlog 3Kb 2p" for 3072 bytes (iproute2's sprint_size).
_CLASS = re.compile(r"class (\S+) (\S+) .*\n Sent (\d+) bytes (\d+) pkt "
                    r"\(dropped (\d+), overlimits \d+ requeues \d+\) *\n"
                    r" backlog ([\d.]+)([KM]?)b (\d+)p")
_UNIT = {"": 1, "K": 1024, "M": 1024 * 1024}


def class_stats(guest, dev):
    """{classid: {kind, bytes, packets, drops, backlog_bytes,
    backlog_packets}} of dev's classes (`tc -s class show`: iproute2 6.1
    prints no JSON for classes)."""
    return parse_class_stats(
        guest.run(["tc", "-s", "class", "show", "dev", dev]).stdout)


def parse_class_stats(out):
    """class_stats() of `tc -s class show` text."""
    return {m[2]: dict(kind=m[1], bytes=int(m[3]), packets=int(m[4]),
                       drops=int(m[5]),
                       backlog_bytes=round(float(m[6]) * _UNIT[m[7]]),
                       backlog_packets=int(m[8]))
            for m in _CLASS.finditer(out)}


class _WireSampler(threading.Thread):
    """Reads the TX bytes of rx's tap (frames from its switch port) at two
    host times, from the senders' start: the steady interval's ends."""

    def __init__(self, lab, rx, steady):
        super().__init__(daemon=True)
        self.wire = lab.wire
        self.tap = Wire.tap(lab.topology.host(rx).nics[0])
        self.steady = steady
        self.samples = []
        self.t0 = time.monotonic()

    def read(self):
        out = self.wire.run(["ip", "-s", "-j", "link", "show", "dev",
                             self.tap]).stdout
        return time.monotonic(), json.loads(out)[0]["stats64"]["tx"]["bytes"]

    def run(self):
        for at in self.steady:
            time.sleep(max(0.0, self.t0 + at - time.monotonic()))
            self.samples.append(self.read())

    def bps(self):
        self.join()
        (t1, b1), (t2, b2) = self.samples
        return (b2 - b1) * 8 / (t2 - t1)


class _PauseSampler(threading.Thread):
    """Every `every` seconds, the switch's pfcd state (/run/pfcd.json,
    read through the agent: no process): how long each port has kept its
    partner paused for the PFC priorities, by the switch's clock. as_json
    gives, per port, [t_s, fraction of the time paused] per stretch
    between two reads, t_s the stretch's middle on priosink's time axis
    (host time since axis_t0)."""

    def __init__(self, guest, ports, prios, axis_t0, every=0.5):
        """ports: {switch port: the machine at its other end}."""
        super().__init__(daemon=True)
        self.guest, self.ports, self.prios = guest, ports, prios
        self.axis_t0, self.every = axis_t0, every
        self.samples = []           # (host t, guest t, {port: paused_ms})
        self.done = threading.Event()

    def _read(self):
        t = time.monotonic()
        try:
            state = json.loads(self.guest.read(PFCD_STATE))
        except Exception:   # a read lost under load is a gap, not an error
            return
        paused = {p["name"]: sum(p["paused_ms"][q] for q in self.prios)
                  for p in state["ports"] if p["name"] in self.ports}
        self.samples.append((t, state["time"], paused))

    def run(self):
        self._read()
        while not self.done.wait(self.every):
            self._read()
        self._read()

    def as_json(self):
        series = {p: [] for p in self.ports}
        for (h0, g0, a), (h1, g1, b) in zip(self.samples, self.samples[1:]):
            if g1 <= g0:
                continue
            for p in self.ports:
                if p in a and p in b:
                    frac = (b[p] - a[p]) / 1e3 / (g1 - g0)
                    series[p].append([round((h0 + h1) / 2 - self.axis_t0, 3),
                                      round(min(max(frac, 0.0), 1.0), 4)])
        return {"prios": list(self.prios), "ports": series,
                "partners": dict(self.ports)}


class _Probes(threading.Thread):
    """prioping probes from one host, started warmup seconds after t0
    (host time) and sent until the steady interval ends."""

    def __init__(self, guest, dst, name, pcp, t0, steady, axis_t0,
                 interval=0.1):
        super().__init__(daemon=True)
        self.guest, self.dst, self.name, self.pcp = guest, dst, name, pcp
        self.t0, self.steady, self.interval = t0, steady, interval
        self.result = None
        self.axis_t0 = axis_t0      # host time of t_s 0 in priosink's series
        self.offset = 0.0
        self.error = None

    def run(self):
        time.sleep(max(0.0, self.t0 + self.steady[0] - time.monotonic()))
        self.offset = time.monotonic() - self.axis_t0
        count = max(1, int((self.steady[1] - self.steady[0]) / self.interval))
        try:
            res = self.guest.run(["prioping", "-j", "-c", str(count), "-i",
                                  str(self.interval), "-P", str(self.pcp),
                                  "-s", "56", "-W", "8", self.dst],
                                 check=False, timeout=count * self.interval
                                 + 60)
            self.result = json.loads(res.stdout)
        except Exception as e:  # reported by as_json's caller
            self.error = f"{type(e).__name__}: {e}"

    def as_json(self, idle):
        self.join()
        probes = (self.result or {}).get("probes", [])
        return {"name": self.name, "pcp": self.pcp, "idle_ms": idle,
                "load": [[p["t_s"] + self.offset, p["rtt_ms"]]
                         for p in probes], "error": self.error}


def idle_rtt(guest, dst, pcp, count=20, interval=0.05):
    """RTTs (ms) of count probes at pcp with nothing else running."""
    res = guest.run(["prioping", "-j", "-c", str(count), "-i", str(interval),
                     "-P", str(pcp), dst], check=False, timeout=60)
    return [p["rtt_ms"] for p in json.loads(res.stdout)["probes"]]


def offer(lab, pcps, *, load=1.2, seconds=8.0, warmup=2.0, senders=("h1",
          "h2"), size=SIZE, extra=(), probes=(), port=SINK_PORT, counts=None,
          drain=0.0):
    """Every pcp offered load x line rate (split over senders; a pcp given
    n times is n flows from each sender, n x the load), plus extra flows
    (host, pcp, frames/s[, cgroup]), and prioping probes (name, host, pcp, idle
    RTTs) in the steady interval, for
    seconds; h3's per-PCP throughput over the steady interval (warmup
    seconds in, until 0.5 s before the senders stop).

    counts {pcp: frames}: each flow of that pcp sends that many frames
    instead of its rate x seconds (a paused sender takes longer: PFC);
    drain: seconds more the sink waits for frames still queued in the
    network once the senders are done (and that much longer without
    one before it gives up)."""
    topo = lab.topology
    sw, sw_port, rx = congested_port(topo)
    line_fps = sw_port.rate_bps / (8 * wire_bytes(size))
    dst = topo.address(rx, vlan=VLAN)
    flows = []
    for i, host in enumerate(senders):
        for j, pcp in enumerate(pcps):
            flows.append(Flow(host, pcp, flow=100 * (i + 1) + j,
                              rate=max(1, round(load * line_fps
                                                / len(senders)))))
            if counts and pcp in counts:
                flows[-1].count = counts[pcp]
    for j, (host, pcp, rate, *cg) in enumerate(extra):
        flows.append(Flow(host, pcp, flow=900 + j, rate=rate,
                          cgroup=cg[0] if cg else ""))
    rxg = lab.guest(rx)
    senders_all = sorted({f.host for f in flows} | {p[1] for p in probes})
    with pinned_neighbours(lab, senders_all, rx):
        return _offer(lab, flows, dst, rxg, sw, sw_port, pcps, seconds,
                      warmup, size, probes, port, drain)


@contextlib.contextmanager
def pinned_neighbours(lab, hosts, rx, vlan=VLAN):
    """Permanent neighbour entries, for the duration, between rx and each
    of hosts on the VLAN (vlan None: untagged, on eth0), both ways. ARP leaves at priority 0, so it
    shares the best-effort class: while that class is backlogged at the
    switch, a host's re-confirmation of its entry for the other end
    (every ~30 s) waits seconds behind it or is dropped, and all that
    host sends to the other end, strict priority included, waits or is
    lost with it (seen: strict probes lost for 0.9 s, then answered
    after 2.3 s; h3's replies to h1 stalled the same way). Deleted
    after, and learnt again by ARP."""
    pinned = []

    def pin(on, to):
        nic = lab.topology.host(on).nics[0]
        dev = nic.name if vlan is None else \
            nic.vlan_dev(next(v for v in nic.vlans if v.id == vlan))
        addr = lab.topology.address(to, vlan=vlan)
        mac = lab.wire.mac(lab.topology.host(to).nics[0])
        lab.guest(on).run(["ip", "neigh", "replace", addr, "lladdr", mac,
                           "dev", dev, "nud", "permanent"])
        pinned.append((on, addr, dev))
    try:
        for h in hosts:
            pin(h, rx)
            pin(rx, h)
        yield
    finally:
        for on, addr, dev in pinned:
            lab.guest(on).run(["ip", "neigh", "del", addr, "dev", dev],
                              check=False)


def _offer(lab, flows, dst, rxg, sw, port, pcps, seconds, warmup, size,
           probes, udp_port, drain=0.0):
    sink_t0 = time.monotonic()
    # Counted flows end when their frames are through, however long a
    # paused class takes: bound it by four times what carrying them all
    # at the port's whole rate takes (a class gets at least its share).
    # The sink ends on idle once they are through.
    counted = sum(f.count for f in flows if f.count)
    longest = max(seconds, 4 * counted * 8 * wire_bytes(size)
                  / port.rate_bps)
    sink = Sink(rxg, DEV, timeout=longest + 6 + 2 * drain, idle=2.0 + drain,
                extra=["--interval", str(INTERVAL_MS), "-p",
                       str(udp_port)])
    sampler = _WireSampler(lab, rxg.name, (warmup, seconds - 0.5))  # t0: now
    procs = [(f, send(lab.guest(f.host), dst, spawn=True, rate=f.rate,
                      count=f.count or int(f.rate * seconds), size=size,
                      flow=f.flow,
                      so_priority=None if f.cgroup else f.pcp,
                      cgroup=f.cgroup or None, port=udp_port))
             for f in flows]
    sampler.start()
    probers = [(_Probes(lab.guest(host), dst, name, pcp, sampler.t0,
                        (warmup, seconds - 0.5), sink_t0), idle)
               for name, host, pcp, idle in probes]
    for p, _ in probers:
        p.start()
    prios = sorted({q for n in sw.nics if n.dcb for q in n.dcb.pfc})
    pauses = _PauseSampler(lab.guest(sw.name), {
        n.name: n.peer.split(":")[0] for n in sw.nics if n.dcb and n.dcb.pfc},
        prios, sink_t0) if prios else None
    if pauses:
        pauses.start()
    try:
        _wait_senders(lab, procs, longest)
        got = sink.result()
    finally:
        if pauses:
            pauses.done.set()
            pauses.join()
    return _offer_result(lab, got, flows, sw, port, pcps, seconds, warmup,
                         size, probers, sampler, pauses)


def _wait_senders(lab, procs, longest):
    for f, p in procs:
        res = lab.guest(f.host).wait(p, timeout=longest + 60)
        out = json.loads(res.stdout)
        f.sent, f.retries = out["sent"], out.get("retries", 0)
        f.elapsed = out["elapsed_s"]


def _offer_result(lab, got, flows, sw, port, pcps, seconds, warmup, size,
                  probers, sampler, pauses):
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
                          expected_shares(port.dcb, sorted(
                              set(pcps) | {f.pcp for f in flows
                                           if f.cgroup})))
    for p in sorted(set(pcps) | {f.pcp for f in flows if f.cgroup}):
        result.got_bps[p] = (sum(iv["pcp_bytes"][p] for iv in span) * 8
                             / secs if secs else 0.0)
    result.sink_drops = got.get("socket_drops", 0)
    result.rtt = [p.as_json(idle) for p, idle in probers]
    result.wire_bps = sampler.bps()
    result.qdisc = class_stats(lab.guest(sw.name), port.name)
    if pauses:
        result.pause = pauses.as_json()
    return result


# --- strict priority ---------------------------------------------------------

def queue_delay_s(lab, pcp, size=SIZE):
    """How long a frame waits at the tail of pcp's full band on the
    congested port: the band's limit (the port's txqueuelen, pfifo's
    default) in frames of size, sent at the class's share of the rate."""
    sw, port, _ = congested_port(lab.topology)
    qlen = int(lab.guest(sw.name).read(
        f"/sys/class/net/{port.name}/tx_queue_len"))
    d = port.dcb
    share = d.bw[d.prio_tc[pcp]] / 100
    return qlen * wire_bytes(size) * 8 / (share * port.rate_bps)


def strict_priority(lab, *, load=0.7, strict_pcp=5, be_pcp=0,
                    stream_share=0.1, prober="h1", loader="h2"):
    """The ETS classes (PCP 0, 2, 3) saturated from loader, each offered
    load x line rate; meanwhile a strict stream (PCP strict_pcp,
    stream_share x line rate) and two probes from prober: prioping at
    strict_pcp and at be_pcp, whose idle RTTs are measured first. The
    load comes from the other sender so that the probes' own host and
    switch port are not where they queue: what is measured is sw's
    congested egress."""
    _, port, rx = congested_port(lab.topology)
    dst = lab.topology.address(rx, vlan=VLAN)
    g = lab.guest(prober)
    idle = {pcp: idle_rtt(g, dst, pcp) for pcp in (strict_pcp, be_pcp)}
    line = port.rate_bps / (8 * wire_bytes())
    return offer(lab, (0, 2, 3), load=load, senders=(loader,),
                 extra=[(prober, strict_pcp, max(1, int(stream_share * line)))],
                 probes=[("strict", prober, strict_pcp, idle[strict_pcp]),
                         ("best-effort", prober, be_pcp, idle[be_pcp])])


# --- applications in cgroups -------------------------------------------------

BULK_CGROUP = f"{NETPRIO}/bulk"


def cgroup_apps(lab, *, load=1.2, bulk_prio=2, host="h1"):
    """Two unmodified senders on host, each offered load x line rate:
    one in the cgroup dcbapp-netprio makes for the APP entry the switch
    advertises (UDP 4791 -> its priority), one in a cgroup given
    bulk_prio by hand. Both send to UDP SINK_PORT (priosink counts one
    port): net_prio classifies by the sender's cgroup, not by the
    destination port. Not to 4791: for that port dcbapp-netprio's nft
    rule sets the APP priority in the output hook, before net_prio's map
    is read, whatever the sender's cgroup. Returns (SharesResult, APP
    priority)."""
    g = lab.guest(host)
    _, port, _ = congested_port(lab.topology)
    app = next(a for a in port.dcb.apps if a.selector == "dgram-port"
               and a.protocol == ROCE_PORT)
    dev = f"eth0.{VLAN}"
    start_dcbapp(g.machine, "--dev", "eth0")
    try:
        wait_for(f"{CHAIN_CGROUP} mapping {dev} to {app.priority}",
                 lambda: chain_ifpriomap(g),
                 lambda m: m.get(dev) == app.priority, timeout=15)
        path, _ = cgroup(g, NETPRIO, "bulk")
        map_priority(g, path, dev, bulk_prio)
        line = port.rate_bps / (8 * wire_bytes())
        rate = max(1, int(load * line))
        r = offer(lab, (), senders=(), port=SINK_PORT,
                  extra=[(host, app.priority, rate, CHAIN_CGROUP),
                         (host, bulk_prio, rate, path)])
    finally:
        stop_dcbapp(g.machine)
    return r, app.priority


# --- the switch's own capacity (make bench) ----------------------------------

def forwarding_capacity(lab, *, load=6.0, seconds=6.0):
    """Frames/s sw forwards to its congested port with the shaper lifted
    (tbf at 1gbit), offered load x the port's line rate as six flows
    from h1 and h2 at one ETS priority; the port's shaper is put back
    after. Returns (forwarded frames/s on the wire by the host's clock,
    offered frames/s, frames the switch's taps dropped on the way in:
    what sw's QEMU did not take)."""
    sw, port, _ = congested_port(lab.topology)
    g = lab.guest(sw.name)
    taps = [Wire.tap(p) for p in sw.nics if p is not port]

    def tap_drops():
        out = json.loads(lab.wire.run(["ip", "-s", "-j", "link"]).stdout)
        return sum(d["stats64"]["tx"]["dropped"] for d in out
                   if d["ifname"] in taps)
    tbf = ["tc", "qdisc", "change", "dev", port.name, "root", "handle", "1:",
           "tbf"]
    g.run(tbf + ["rate", "1gbit", "burst", "1mb", "latency", "100ms"])
    try:
        before = tap_drops()
        r = offer(lab, (2, 2, 2), load=load, seconds=seconds)
        dropped = tap_drops() - before
    finally:
        g.run(tbf + ["rate", port.rate, "burst",
                     str(tbf_burst(port.rate_bps)),
                     "latency", "100ms"])
    offered = sum(f.rate for f in r.flows)
    return r.wire_bps / (8 * wire_bytes()), offered, dropped
