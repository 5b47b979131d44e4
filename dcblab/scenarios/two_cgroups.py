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

__all__ = ["FlowResult", "TwoCgroupsResult", "two_cgroups_at_once",
           "DEFAULT_PRIOS"]

DEFAULT_PRIOS = {1: 2, 2: 5}      # flow -> net_prio priority of its cgroup


@dataclass(frozen=True)
class FlowResult:
    flow: int
    cgroup: str
    prio: int
    map: str               # the ifpriomap line written, e.g. "eth0.100 2"
    sent: int
    received: int          # by priosink on the receiver
    lost: int
    duplicates: int
    pcp_rx: dict           # {pcp: frames} seen by priosink
    traced: int            # tracepoint: map applied with this priority
    wire_pcp: dict         # {pcp: frames} in the capture ({} if none)

    @property
    def misclassified(self):
        return self.received - self.pcp_rx.get(self.prio, 0)


@dataclass(frozen=True)
class TwoCgroupsResult:
    sender: str
    receiver: str
    vlan_dev: str
    flows: tuple           # of FlowResult
    tc_tx: dict            # {TC: packets} on the sender's mqprio queues
    flower_rx: dict        # {pcp: packets} counted by flower on receiver
    seconds: float         # senders spawned -> sink's result

    @property
    def classified(self):
        return sum(f.received - f.misclassified for f in self.flows)

    @property
    def rate(self):
        """Classified frames per second, guest to guest."""
        return self.classified / self.seconds if self.seconds else 0.0


def two_cgroups_at_once(lab, prios=None, per_flow=50_000, vlan=100,
                        sender="h1", receiver="h2", capture=None,
                        timeout=300):
    """Run the scenario on a LabHandle; returns a TwoCgroupsResult.

    ``prios`` is {flow: priority}; ``capture`` names a pcap file to record
    the wire into (host side of the sender's link).
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
        tracers[flow] = TraceCounter(
            tx, f"flow{flow}", f'name == "{vlan_dev}" && prioidx == {idx} '
            f"&& applied == 1 && new_priority == {prio}")
    total = per_flow * len(prios)
    cap = None
    if capture:
        cap = lab.wire.capture(nic, capture, total,
                               ["vlan", "and", "udp", "port", "9000"])
    queues = QueueCounter(tx, nic.name)
    sink = Sink(rx, rx_nic, count=total, timeout=timeout, idle=5)
    t0 = time.monotonic()
    running = {flow: send(tx, dst, spawn=True, count=per_flow, flow=flow,
                          cgroup=paths[flow]) for flow in prios}
    sent = {flow: tx.wait(p, timeout=timeout) for flow, p in running.items()}
    got = sink.result()
    seconds = time.monotonic() - t0
    wire = _finish_capture(cap, capture) if cap else {}
    flows = []
    for flow, prio in prios.items():
        f = flow_of(got, flow)
        flows.append(FlowResult(
            flow=flow, cgroup=paths[flow], prio=prio,
            map=f"{vlan_dev} {prio}",
            sent=_json_sent(sent[flow]), received=f["received"],
            lost=f["lost"], duplicates=f["duplicates"],
            pcp_rx=pcp_counts(f), traced=tracers[flow].count(),
            wire_pcp=wire.get(flow, {})))
    return TwoCgroupsResult(
        sender=sender, receiver=receiver, vlan_dev=vlan_dev,
        flows=tuple(flows),
        tc_tx={q: n for q, n in queues.delta().items() if n},
        flower_rx={p: n for p, n in pcp_packets(rx, rx_nic).items() if n},
        seconds=seconds)


def _json_sent(res):
    return json.loads(res.stdout)["sent"]


def _finish_capture(cap, path):
    try:
        cap.wait(timeout=10)
    except subprocess.TimeoutExpired:
        # tcpdump missed frames and waits for more: stop it, keep the
        # file; the result then shows fewer captured than sent.
        cap.send_signal(signal.SIGINT)
        cap.wait(timeout=10)
    return wire_pcp_per_flow(path)
