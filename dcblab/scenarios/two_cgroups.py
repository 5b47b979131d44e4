"""Two cgroups on one host send at once; net_prio maps each to its own
priority on the VLAN device. Used by the test suite, `dcblab demo` and
`dcblab bench`, so all three show the same measurement.

Evidence gathered per flow, independently of each other:
  sender    the mqprio TC queue the frames left by (queue counters) and the
            net_prio tracepoint's "map applied" decisions for the cgroup
  wire      the PCP in each frame's 802.1Q tag (a capture on the host side
            of the link, when asked for)
  receiver  priosink's PCP per frame (PACKET_AUXDATA) and tc flower
            vlan_prio counters on ingress

Lost frames are accounted for from the kernel's own drop counters, read
before and after the run on the sender, in the lab's netns and on the
receiver (see ``TwoCgroupsResult.stages``), so a loss always comes with
where it happened.
"""

import json
import signal
import subprocess
import time
from dataclasses import dataclass

from ..testing.traffic import (NETPRIO, QueueCounter, Sink, TraceCounter,
                               cgroup, flow_of, map_priority, pcp_counts,
                               pcp_packets, send, traffic_classes,
                               wire_pcp_per_flow)

__all__ = ["FlowResult", "Drop", "Stage", "TwoCgroupsResult",
           "two_cgroups_at_once", "DEFAULT_PRIOS", "SINK_IDLE_S", "SENDER",
           "LINK", "RECEIVER"]

DEFAULT_PRIOS = {1: 2, 2: 5}      # flow -> net_prio priority of its cgroup
SINK_IDLE_S = 5.0                 # priosink stops this long after its last
                                  # frame when frames were lost

# The three stages of the path, in order, each bounded by a count the
# scenario has per flow: priosend's "sent", the sender's mqprio queue
# counters, the receiver's flower counters, priosink's "received".
SENDER, LINK, RECEIVER = "sender", "link", "receiver"


@dataclass(frozen=True)
class FlowResult:
    flow: int
    cgroup: str
    prio: int
    map: str               # the ifpriomap line written, e.g. "eth0.100 2"
    sent: int
    received: int          # distinct frames seen by priosink on the receiver
    duplicates: int
    pcp_rx: dict           # {pcp: frames} seen by priosink
    traced: int | None     # tracepoint: map applied with this priority
                           # (None: run with the tracepoint off)
    wire_pcp: dict         # {pcp: frames} in the capture ({} if none)

    @property
    def lost(self):
        """Sent and never received; unlike priosink's own "lost" (gaps
        below the highest sequence number seen) this counts a lost tail."""
        return self.sent - self.received

    @property
    def misclassified(self):
        return self.received - self.pcp_rx.get(self.prio, 0)


@dataclass(frozen=True)
class Drop:
    """One kernel drop counter over the run."""
    stage: str             # SENDER, LINK or RECEIVER
    counter: str           # where it is read, e.g. "h2: priosink socket drops"
    frames: int            # its increase during the run
    means: str             # what was full or refused when it counted


@dataclass(frozen=True)
class Stage:
    """A stretch of the path: frames that went in and did not come out,
    by the flows' own counts at each end, and the drop counters that
    count inside it."""
    name: str
    into: int
    out: int
    drops: tuple           # of Drop

    @property
    def missing(self):
        return self.into - self.out

    @property
    def counted(self):
        return sum(d.frames for d in self.drops)


@dataclass(frozen=True)
class TwoCgroupsResult:
    sender: str
    receiver: str
    vlan_dev: str
    flows: tuple           # of FlowResult
    tc_tx: dict            # {TC: packets} on the sender's mqprio queues
    flower_rx: dict        # {pcp: packets} counted by flower on receiver
    drops: tuple           # of Drop, every counter read, zeros included
    send_seconds: float    # longest priosend run (each times its own loop)
    receive_seconds: float  # priosink start -> its last frame (idle wait
                            # excluded)
    wall_seconds: float    # host: senders spawned -> sink's result (with
                           # the sink's idle wait when frames were lost)

    @property
    def sent(self):
        return sum(f.sent for f in self.flows)

    @property
    def received(self):
        return sum(f.received for f in self.flows)

    @property
    def lost(self):
        return sum(f.lost for f in self.flows)

    @property
    def loss(self):
        """Lost frames as a fraction of those sent."""
        return self.lost / self.sent if self.sent else 0.0

    @property
    def classified(self):
        return sum(f.received - f.misclassified for f in self.flows)

    @property
    def seconds(self):
        """The window the rate is taken over: the longer of the senders'
        run and the receiver's first-to-last-frame, so neither a slow
        sender nor a slow receiver flatters it; never the sink's idle wait."""
        return max(self.send_seconds, self.receive_seconds)

    @property
    def rate(self):
        """Classified frames per second, guest to guest."""
        return self.classified / self.seconds if self.seconds else 0.0

    @property
    def stages(self):
        """The path in three stages, each with the frames that went missing
        in it (by the flows' counts at its two ends) and the kernel's drop
        counters inside it."""
        left = sum(self.tc_tx.get(f.prio, 0) for f in self.flows)
        reached = sum(self.flower_rx.get(f.prio, 0) for f in self.flows)
        ends = {SENDER: (f"{self.sender}: priosend -> its mqprio queues",
                         self.sent, left),
                LINK: (f"{self.sender}'s queues -> {self.receiver}'s "
                       "receive path (flower)", left, reached),
                RECEIVER: (f"{self.receiver}'s receive path -> priosink",
                           reached, self.received)}
        return tuple(Stage(name, into, out,
                           tuple(d for d in self.drops if d.stage == key))
                     for key, (name, into, out) in ends.items())

    def explain_loss(self):
        """Lines saying where the lost frames went, stage by stage, from
        the kernel's counters; empty when nothing was lost."""
        if not self.lost:
            return []
        lines = [f"{self.lost} of {self.sent} frames lost ({self.loss:.2%});"
                 " where, by the flows' counts and the kernel's drop "
                 "counters:"]
        width = max(len(s.name) for s in self.stages)
        for s in self.stages:
            lines.append(f"  {s.name:<{width}}  {s.missing:>7} missing")
            moved = [d for d in s.drops if d.frames]
            for d in moved:
                lines.append(f"      {d.frames:>7}  {d.counter}")
            if not moved:
                lines.append("               no drop counter moved ("
                             + ", ".join(d.counter.split(": ", 1)[1]
                                         for d in s.drops) + ")")
        lines.append(f"  so: {self.loss_reason()}")
        return lines

    def loss_reason(self):
        """One line: for each stage where frames went missing, the drop
        counters that took them and what that means; what no counter of
        the stage explains is said as such."""
        if not self.lost:
            return "no frame lost"
        parts = []
        for s in self.stages:
            if s.missing <= 0:
                continue
            parts += [f"{d.frames} {d.counter} ({d.means})"
                      for d in sorted(s.drops, key=lambda d: -d.frames)
                      if d.frames]
            if s.missing > s.counted:
                parts.append(f"{s.missing - s.counted} lost in {s.name} "
                             "with no drop counter moving")
        return "; ".join(parts)


# Drop counters, in path order: (stage, where, counter, what it means).
# Read before and after the run; ``where`` is "sender", "receiver" or "netns".
_COUNTERS = (
    (SENDER, "sender", "qdisc drops on {nic}",
     "its TC queues overflowed: the virtio TX ring was full"),
    (SENDER, "sender", "{vlan} TX dropped",
     "the VLAN device's transmit to the NIC was refused"),
    (SENDER, "sender", "Udp SndbufErrors",
     "a UDP send got ENOBUFS; priosend retries those it sees, but without "
     "IP_RECVERR a qdisc drop is reported to it as sent"),
    (LINK, "sender", "{nic} TX dropped",
     "virtio-net could not hand the frame to QEMU"),
    (LINK, "netns", "tap {tx_tap} RX dropped",
     "the host dropped the frame as it came from the sender"),
    (LINK, "netns", "tap {rx_tap} TX dropped",
     "the tap's queue toward the receiver was full: its QEMU did not take "
     "frames in time"),
    (LINK, "netns", "qdisc drops on tap {rx_tap}",
     "the qdisc in front of the receiver's tap overflowed"),
    (LINK, "receiver", "{rx_nic} RX dropped",
     "virtio-net on the receiver dropped it on arrival"),
    (LINK, "receiver", "softnet dropped",
     "the receiver's backlog was full (netdev_max_backlog)"),
    (RECEIVER, "receiver", "priosink socket drops",
     "priosink's receive buffer was full: it read too slowly"),
    (RECEIVER, "receiver", "Udp RcvbufErrors",
     "a UDP socket's receive buffer was full"),
)


def _link_stats(out):
    """{dev: {"rx": {...}, "tx": {...}}} from `ip -s -j link show`."""
    return {link["ifname"]: link.get("stats64", {})
            for link in json.loads(out)}


def _qdisc_drops(out, parent_prefix=""):
    """Sum of "drops" of the qdiscs in `tc -s -j qdisc show` output whose
    parent starts with parent_prefix; "" means the root qdiscs' children
    and the root alike, counted once (leaves only)."""
    qdiscs = json.loads(out)
    if parent_prefix:
        return sum(q.get("drops", 0) for q in qdiscs
                   if q.get("parent", "").startswith(parent_prefix))
    # A multi-queue root (mq, mqprio) reports its children's sum: count the
    # children when there are any, else the root.
    children = [q for q in qdiscs if "parent" in q and q["parent"] != "root"]
    return sum(q.get("drops", 0) for q in (children or qdiscs))


def _snmp(text, proto="Udp"):
    rows = [line.split()[1:] for line in text.splitlines()
            if line.startswith(f"{proto}:")]
    return dict(zip(rows[0], map(int, rows[1])))


def _softnet_dropped(text):
    # One line per CPU, hex columns; the second is "dropped".
    return sum(int(line.split()[1], 16) for line in text.splitlines()
               if line.strip())


def _stat(stats, direction, key):
    return stats.get(direction, {}).get(key, 0)


class _DropCounters:
    """The _COUNTERS of one run: read() at the start, deltas() at the end."""

    def __init__(self, lab, tx, rx, nic, rx_nic, vlan_dev, handle="100"):
        self.tx, self.rx, self.wire = tx, rx, lab.wire
        link = lab.topology.link(nic.link)
        peer = link.b if link.a.host == nic.host else link.a
        self.names = {"nic": nic.name, "vlan": vlan_dev, "rx_nic": rx_nic,
                      "tx_tap": lab.wire.tap(nic),
                      "rx_tap": lab.wire.tap(peer)}
        self.handle = handle
        self.before = self.read()

    def read(self, sink_socket_drops=0):
        n = self.names
        show = ["ip", "-s", "-j", "link", "show"]
        tx_links = _link_stats(self.tx.run(show).stdout)
        rx_links = _link_stats(self.rx.run(show).stdout)
        ns_links = _link_stats(self.wire.run(show).stdout)
        tx_udp = _snmp(self.tx.read("/proc/net/snmp"))
        rx_udp = _snmp(self.rx.read("/proc/net/snmp"))
        tx_q = self.tx.run(["tc", "-s", "-j", "qdisc", "show", "dev",
                            n["nic"]]).stdout
        tap_q = self.wire.run(["tc", "-s", "-j", "qdisc", "show", "dev",
                               n["rx_tap"]]).stdout
        return {
            "qdisc drops on {nic}": _qdisc_drops(tx_q, f"{self.handle}:"),
            "{vlan} TX dropped": _stat(tx_links[n["vlan"]], "tx", "dropped"),
            "Udp SndbufErrors": tx_udp.get("SndbufErrors", 0),
            "{nic} TX dropped": _stat(tx_links[n["nic"]], "tx", "dropped"),
            "tap {tx_tap} RX dropped": _stat(ns_links[n["tx_tap"]], "rx",
                                             "dropped"),
            "tap {rx_tap} TX dropped": _stat(ns_links[n["rx_tap"]], "tx",
                                             "dropped"),
            "qdisc drops on tap {rx_tap}": _qdisc_drops(tap_q),
            "{rx_nic} RX dropped": (
                _stat(rx_links[n["rx_nic"]], "rx", "dropped")
                + _stat(rx_links[n["rx_nic"]], "rx", "missed")),
            "softnet dropped": _softnet_dropped(
                self.rx.read("/proc/net/softnet_stat")),
            "priosink socket drops": sink_socket_drops,
            "Udp RcvbufErrors": rx_udp.get("RcvbufErrors", 0),
        }

    def deltas(self, sink_socket_drops):
        """Drops over the run, in _COUNTERS order. priosink's socket drops
        are its own (PACKET_STATISTICS of the socket it opened)."""
        after = self.read(sink_socket_drops)
        hosts = {"sender": self.tx.name, "receiver": self.rx.name,
                 "netns": self.wire.netns}
        return tuple(
            Drop(stage, f"{hosts[where]}: {key.format(**self.names)}",
                 after[key] - self.before[key], means)
            for stage, where, key, means in _COUNTERS)


def two_cgroups_at_once(lab, prios=None, per_flow=50_000, vlan=100,
                        sender="h1", receiver="h2", capture=None,
                        timeout=300, trace=True):
    """Run the scenario on a LabHandle; returns a TwoCgroupsResult.

    ``prios`` is {flow: priority}; ``capture`` names a pcap file to record
    the wire into (host side of the sender's link). ``trace=False`` leaves
    the net_prio tracepoint off (and needs no kernel that has it: make
    bench's series without patch 0001); the flows' ``traced`` is None.
    """
    prios = prios or DEFAULT_PRIOS
    tx, rx = lab.guest(sender), lab.guest(receiver)
    nic = lab.topology.host(sender).nics[0]
    vlan_dev = f"{nic.name}.{vlan}"
    dst = lab.topology.address(receiver, vlan)
    rx_nic = lab.topology.host(receiver).nics[0].name
    traffic_classes(tx, rx, dst, vlan, nic.name, rx_nic)
    paths, tracers = {}, {}
    for flow, prio in prios.items():
        paths[flow], idx = cgroup(tx, NETPRIO, f"flow{flow}")
        map_priority(tx, paths[flow], vlan_dev, prio)
        if trace:
            tracers[flow] = TraceCounter(
                tx, f"flow{flow}", f'name == "{vlan_dev}" && prioidx == '
                f"{idx} && applied == 1 && new_priority == {prio}")
    total = per_flow * len(prios)
    cap = None
    if capture:
        cap = lab.wire.capture(nic, capture, total,
                               ["vlan", "and", "udp", "port", "9000"])
    queues = QueueCounter(tx, nic.name)
    drops = _DropCounters(lab, tx, rx, nic, rx_nic, vlan_dev)
    sink = Sink(rx, rx_nic, count=total, timeout=timeout, idle=SINK_IDLE_S)
    t0 = time.monotonic()
    running = {flow: send(tx, dst, spawn=True, count=per_flow, flow=flow,
                          cgroup=paths[flow]) for flow in prios}
    sent = {flow: json.loads(tx.wait(p, timeout=timeout).stdout)
            for flow, p in running.items()}
    got = sink.result()
    wall = time.monotonic() - t0
    wire = _finish_capture(cap, capture) if cap else {}
    flows = []
    for flow, prio in prios.items():
        f = flow_of(got, flow)
        flows.append(FlowResult(
            flow=flow, cgroup=paths[flow], prio=prio,
            map=f"{vlan_dev} {prio}",
            sent=sent[flow]["sent"], received=f["received"],
            duplicates=f["duplicates"],
            pcp_rx=pcp_counts(f),
            traced=tracers[flow].count() if trace else None,
            wire_pcp=wire.get(flow, {})))
    return TwoCgroupsResult(
        sender=sender, receiver=receiver, vlan_dev=vlan_dev,
        flows=tuple(flows),
        tc_tx={q: n for q, n in queues.delta().items() if n},
        flower_rx={p: n for p, n in pcp_packets(rx, rx_nic).items() if n},
        drops=drops.deltas(got["socket_drops"]),
        send_seconds=max(s["elapsed_s"] for s in sent.values()),
        receive_seconds=_receive_window(got, total, timeout),
        wall_seconds=wall)


def _receive_window(got, count, timeout):
    """Seconds from priosink's start to its last frame. priosink stops at
    its count (then its elapsed time ends at the last frame), on the idle
    timeout (SINK_IDLE_S after the last frame) or on its overall timeout."""
    elapsed = got["elapsed_s"]
    if got["frames"] >= count or elapsed >= timeout:
        return elapsed
    return max(elapsed - SINK_IDLE_S, 0.0)


def _finish_capture(cap, path):
    try:
        cap.wait(timeout=10)
    except subprocess.TimeoutExpired:
        # tcpdump missed frames and waits for more: stop it, keep the
        # file; the result then shows fewer captured than sent.
        cap.send_signal(signal.SIGINT)
        cap.wait(timeout=10)
    return wire_pcp_per_flow(path)
