"""One flow through a fault on the wire (dcblab.lab.faults): h1 sends
numbered frames at one priority over l1 while the link carries a fault;
the result holds what each side counted, so each count can be checked
against the others. Used by tests/test_wire_faults.py and for the figures
of docs/faults.md.

  h1 (sender)   priosend's count; netem's own counters on the TX queue the
                flow leaves by (the traffic-class baseline: mqprio, priority
                p -> TC p -> queue p, so that queue carries nothing else)
  on the way    the other drop counters a frame can die on after netem:
                h1's NIC, both taps in the lab's netns, h2's NIC, priosink's
                socket
  h2 (receiver) priosink: distinct frames, duplicates, reordered, PCPs

The fault is set after the baseline (a new root qdisc would replace it)
and taken off on every path.
"""

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Optional

from ..lab.faults import Fault, LinkFaults, NetemCounters, netem_counters, \
    read_end
from ..testing.traffic import Sink, flow_of, pcp_counts, send, \
    traffic_classes

__all__ = ["FaultRun", "flow_through_fault", "FLOW_PRIO", "VID",
           "SINK_IDLE_S"]

VID = 100
# The flow's priority: TC 5 and TX queue 5 on h1. The guests' own frames
# leave at priority 0 (ARP, ND) and 7 (lldpad's LLDPDUs), on other queues.
FLOW_PRIO = 5
SINK_IDLE_S = 2.0      # priosink stops this long after the last frame


@dataclass(frozen=True)
class FaultRun:
    fault: Optional[Fault]
    prio: int
    queue: int             # h1's TX queue the flow left by
    sent: int              # priosend
    received: int          # distinct frames priosink saw
    duplicates: int        # frames priosink saw again
    reordered: int         # frames below the highest sequence number seen
    pcp: dict              # {pcp: frames} priosink saw, duplicates included
    netem: Optional[NetemCounters]   # the queue's netem over the run
    other_drops: dict      # {counter: frames} on the way, besides netem
    seconds: float         # send start -> priosink's result

    @property
    def lost(self):
        """Sent and never received (a lost tail included)."""
        return self.sent - self.received

    @property
    def misclassified(self):
        """Frames that arrived with a PCP other than the flow's."""
        return sum(self.pcp.values()) - self.pcp.get(self.prio, 0)

    @property
    def duplicated(self):
        """Duplicates by netem's own counters: it counts frames out and
        drops, not frames in; what went in is what priosend sent."""
        return self.netem.sent + self.netem.dropped - self.sent


def _netem_of(guest, dev, queue):
    qdiscs, _, _ = read_end(guest, dev)
    return next((n for n in netem_counters(qdiscs) if n.queue == queue),
                None)


def _delta(after, before):
    if after is None:
        return None
    if before is None or before.handle != after.handle:
        return after
    return dataclasses.replace(
        after, **{k: getattr(after, k) - getattr(before, k)
                  for k in ("sent", "dropped", "requeues", "child_dropped")})


def _drop_counters(lab, tx_nic, rx_nic):
    """The drop counters after h1's qdiscs: {name: count}."""
    show = ["ip", "-s", "-j", "link", "show"]

    def stats(out, dev):
        for link in json.loads(out):
            if link["ifname"] == dev:
                return link.get("stats64", {})
        return {}
    tx = stats(lab.guest(tx_nic.host).run(show).stdout, tx_nic.name)
    rx = stats(lab.guest(rx_nic.host).run(show).stdout, rx_nic.name)
    ns = lab.wire.run(show).stdout
    tx_tap, rx_tap = lab.wire.tap(tx_nic), lab.wire.tap(rx_nic)
    return {
        f"{tx_nic.host} {tx_nic.name} TX dropped":
            tx.get("tx", {}).get("dropped", 0),
        f"tap {tx_tap} RX dropped": stats(ns, tx_tap).get("rx", {})
        .get("dropped", 0),
        f"tap {rx_tap} TX dropped": stats(ns, rx_tap).get("tx", {})
        .get("dropped", 0),
        f"{rx_nic.host} {rx_nic.name} RX dropped":
            rx.get("rx", {}).get("dropped", 0)
            + rx.get("rx", {}).get("missed", 0),
    }


def flow_through_fault(lab, fault, *, count, prio=FLOW_PRIO, link="l1"):
    """On a LabHandle: the traffic-class baseline, FAULT on LINK (both
    ends; None: no fault), COUNT frames from LINK's a end to its b end at
    priority PRIO (SO_PRIORITY, VLAN VID); the FaultRun. The fault is
    taken off again on every path."""
    the_link = lab.topology.link(link)
    tx_nic, rx_nic = the_link.a, the_link.b
    tx, rx = lab.guest(tx_nic.host), lab.guest(rx_nic.host)
    dst = lab.topology.address(rx_nic.host, VID, nic=rx_nic.name)
    traffic_classes(tx, rx, dst, VID, tx_nic.name, rx_nic.name)
    queue = prio      # traffic.mqprio(): priority p -> TC p -> queue p
    faults = LinkFaults(lab.lab, link, lab.guests)
    if fault is not None:
        faults.set(fault)
    try:
        netem_before = _netem_of(tx, tx_nic.name, queue)
        drops_before = _drop_counters(lab, tx_nic, rx_nic)
        # With duplicates priosink cannot stop at COUNT frames: it waits
        # for the line to fall idle.
        sink = Sink(rx, rx_nic.name, timeout=60, idle=SINK_IDLE_S,
                    count=0 if fault and fault.duplicate else count)
        t0 = time.monotonic()
        sent = send(tx, dst, count=count, so_priority=prio)
        got = sink.result()
        seconds = time.monotonic() - t0
        netem = _delta(_netem_of(tx, tx_nic.name, queue), netem_before)
        drops_after = _drop_counters(lab, tx_nic, rx_nic)
    finally:
        if fault is not None:
            faults.clear()
    f = flow_of(got, 1)
    other = {k: drops_after[k] - drops_before[k] for k in drops_after}
    other[f"{rx_nic.host} priosink socket drops"] = got["socket_drops"]
    return FaultRun(fault=fault, prio=prio, queue=queue, sent=sent["sent"],
                    received=f["received"], duplicates=f["duplicates"],
                    reordered=f["reordered"], pcp=pcp_counts(f),
                    netem=netem, other_drops=other, seconds=seconds)
