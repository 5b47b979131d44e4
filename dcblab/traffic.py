"""Traffic classes and traffic in the guests: what the scenarios build on.

Sender side (h1): ``mqprio`` with one TX queue per traffic class stands in
for DCB traffic classes, and the net_prio tracepoint counts decisions.
Receiver side (h2): tc flower ``vlan_prio`` filters on ingress count frames
per PCP, independently of ``priosink`` (our AF_PACKET counter).
"""

import json
import signal
import subprocess
import time

__all__ = ["NETPRIO", "NETCLS", "mqprio", "queue_packets", "pcp_filters",
           "pcp_packets", "Sink", "send", "TraceCounter", "cgroup",
           "two_cgroups_at_once"]

NETPRIO = "/sys/fs/cgroup/net_prio"
NETCLS = "/sys/fs/cgroup/net_cls"
_TRACING = "/sys/kernel/tracing"
_EVENT = "events/net_prio/netprio_skb_update"


def cgroup(guest, ctl_root, name):
    """Create cgroup NAME under a v1 hierarchy; returns (path, prioidx).

    prioidx is None outside net_prio. The baseline restore removes it.
    """
    path = f"{ctl_root}/{name}"
    guest.run(["mkdir", path])
    idx = None
    if ctl_root == NETPRIO:
        idx = int(guest.read(f"{path}/net_prio.prioidx"))
    return path, idx


def mqprio(guest, dev="eth0", num_tc=8, handle="100"):
    """mqprio with num_tc classes, priority p -> TC p, one queue per TC.

    Priorities num_tc..15 fall back to TC 0.
    """
    prio_map = [str(p) if p < num_tc else "0" for p in range(16)]
    queues = [f"1@{tc}" for tc in range(num_tc)]
    guest.run(["tc", "qdisc", "replace", "dev", dev, "root", "handle",
               f"{handle}:", "mqprio", "num_tc", str(num_tc), "map",
               *prio_map, "queues", *queues, "hw", "0"])


def queue_packets(guest, dev="eth0", handle="100"):
    """{queue index: packets sent} from the qdiscs under mqprio.

    With one queue per TC (see mqprio()), queue index == TC.
    """
    out = json.loads(guest.run(["tc", "-s", "-j", "qdisc", "show", "dev",
                                dev]).stdout)
    counts = {}
    for q in out:
        parent = q.get("parent", "")
        if parent.startswith(f"{handle}:"):
            counts[int(parent.split(":")[1], 16) - 1] = q["packets"]
    return counts


def pcp_filters(guest, dev="eth0", vid=100):
    """Ingress counters on the receiver: one flower filter per PCP 0..7."""
    guest.run(["tc", "qdisc", "add", "dev", dev, "clsact"])
    for pcp in range(8):
        guest.run(["tc", "filter", "add", "dev", dev, "ingress", "protocol",
                   "802.1Q", "pref", str(10 + pcp), "flower", "vlan_id",
                   str(vid), "vlan_prio", str(pcp), "action", "pass"])


def pcp_packets(guest, dev="eth0"):
    """{pcp: packets} counted by the pcp_filters() filters."""
    out = json.loads(guest.run(["tc", "-s", "-j", "filter", "show", "dev",
                                dev, "ingress"]).stdout)
    counts = {}
    for f in out:
        opts = f.get("options", {})
        keys = opts.get("keys", {})
        if "vlan_prio" in keys and opts.get("actions"):
            counts[int(keys["vlan_prio"])] = \
                opts["actions"][0]["stats"]["packets"]
    return counts


class Sink:
    """priosink running in a guest until count/timeout; result() is its JSON."""

    def __init__(self, guest, iface, *, count=0, timeout=10.0, idle=0.0,
                 extra=()):
        self.guest = guest
        self.ready = f"/tmp/priosink-ready-{time.monotonic_ns()}"
        self.argv = ["priosink", "-j", "-i", iface, "-t", str(timeout),
                     "-c", str(count), "-R", self.ready, *extra]
        if idle:
            self.argv += ["--idle", str(idle)]
        self.timeout = timeout
        self.pid = guest.vm.agent.spawn(self.argv)
        guest.history.append(f"{guest.name}$ {' '.join(self.argv)} &")
        self._wait_ready()

    def _wait_ready(self):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.guest.run(["test", "-e", self.ready], check=False).rc == 0:
                return
            time.sleep(0.02)
        res = self.guest.vm.agent.wait(self.pid, self.argv, timeout=5)
        raise AssertionError(f"priosink never became ready: rc {res.rc}, "
                             f"stderr {res.stderr!r}")

    def result(self):
        res = self.guest.vm.agent.wait(self.pid, self.argv,
                                       timeout=self.timeout + 30)
        if res.rc != 0:
            raise AssertionError(f"priosink exited {res.rc}: {res.stderr}")
        return json.loads(res.stdout)


def send(guest, dest, *, spawn=False, **opts):
    """priosend -j DEST with options (count=, flow=, cgroup=, ...).

    Keyword names are the long options with '-' as '_'; True is a flag.
    Returns the JSON result, or with spawn=True the guest pid (collect it
    with guest.vm.agent.wait).
    """
    argv = ["priosend", "-j"]
    for key, value in opts.items():
        if value is None or value is False:
            continue
        argv.append("--" + key.replace("_", "-"))
        if value is not True:
            argv.append(str(value))
    argv.append(dest)
    if spawn:
        guest.history.append(f"{guest.name}$ {' '.join(argv)} &")
        return guest.vm.agent.spawn(argv), argv
    return json.loads(guest.run(argv, timeout=120).stdout)


class TraceCounter:
    """Counts net_prio:netprio_skb_update events matching a filter.

    Each counter is its own tracefs instance, so several filters count at
    once; the count is entries + overrun of the instance's ring buffers,
    exact even when the buffer wrapped.
    """

    def __init__(self, guest, name, event_filter):
        self.guest = guest
        self.dir = f"{_TRACING}/instances/{name}"
        guest.run(["mkdir", self.dir])
        guest.write(f"{self.dir}/{_EVENT}/filter", event_filter)
        guest.write(f"{self.dir}/{_EVENT}/enable", "1")

    def count(self):
        total = 0
        cpus = self.guest.run(["ls", f"{self.dir}/per_cpu"]).stdout.split()
        for cpu in cpus:
            stats = self.guest.read(f"{self.dir}/per_cpu/{cpu}/stats")
            for line in stats.splitlines():
                key, _, value = line.partition(":")
                if key.strip() in ("entries", "overrun"):
                    total += int(value)
        return total

    def stop(self):
        self.guest.write(f"{self.dir}/{_EVENT}/enable", "0")


def _wire_pcp_per_flow(pcap_file):
    """{flow: {pcp: frames}} of priosend's UDP frames in a capture."""
    from . import pcap
    counts = {}
    for frame in pcap.read_frames(pcap_file):
        tag = pcap.vlan_tag(frame)
        if not tag or tag[2] != 0x0800:
            continue
        ihl = (frame[18] & 0x0F) * 4
        payload = frame[18 + ihl + 8:]
        if payload[:4] != b"DCB1":
            continue
        flow = int.from_bytes(payload[4:8], "big")
        per = counts.setdefault(flow, {})
        per[tag[1]] = per.get(tag[1], 0) + 1
    return counts


def two_cgroups_at_once(h1, h2, wire, h1nic, dst, prios, per_flow,
                        vlan_dev="eth0.100", capture=None):
    """Scenario 3 as a measurement: one cgroup per flow, all sending at once.

    prios is {flow: priority}; returns one row per flow with the cgroup,
    its map, the TC on h1 (mqprio queue counters), the PCP on the wire (a
    capture on the host side, when ``capture`` names a pcap file), the PCP
    and count on h2 (priosink) and the misclassified frames, plus the
    guest-to-guest classified frames per second.
    """
    mqprio(h1, "eth0")
    pcp_filters(h2, "eth0", int(vlan_dev.split(".")[1]))
    h1.run(["ping", "-c", "1", "-W", "2", dst])  # resolve ARP first
    paths = {}
    for flow, prio in prios.items():
        paths[flow], _ = cgroup(h1, NETPRIO, f"flow{flow}")
        h1.run(["cgwrite", f"{paths[flow]}/net_prio.ifpriomap",
                f"{vlan_dev} {prio}"])
    total = per_flow * len(prios)
    cap = None
    if capture:
        cap = wire.capture(h1nic, capture, total,
                           ["vlan", "and", "udp", "port", "9000"])
    before = queue_packets(h1, "eth0")
    sink = Sink(h2, "eth0", count=total, timeout=300, idle=5)
    t0 = time.monotonic()
    running = [send(h1, dst, spawn=True, count=per_flow, flow=flow,
                    cgroup=paths[flow]) for flow in prios]
    for pid, argv in running:
        res = h1.vm.agent.wait(pid, argv, timeout=300)
        if res.rc != 0:
            raise AssertionError(f"priosend exited {res.rc}: {res.stderr}")
    got = sink.result()
    seconds = time.monotonic() - t0
    wire_pcp = {}
    if cap:
        try:
            cap.wait(timeout=10)
        except subprocess.TimeoutExpired:
            # tcpdump missed frames and waits for more: stop it, keep the
            # file; the table then shows fewer captured than sent.
            cap.send_signal(signal.SIGINT)
            cap.wait(timeout=10)
        wire_pcp = _wire_pcp_per_flow(capture)
    after = queue_packets(h1, "eth0")
    tcs = {q: after[q] - before.get(q, 0) for q in after}
    rows = []
    for flow, prio in prios.items():
        f = next((x for x in got["flows"] if x["flow"] == flow),
                 {"received": 0, "pcp": {}, "lost": per_flow})
        right = f["pcp"].get(str(prio), 0)
        rows.append({
            "flow": flow, "cgroup": paths[flow],
            "map": f"{vlan_dev} {prio}",
            "tc_h1": {tc: n for tc, n in tcs.items() if n},
            "wire_pcp": wire_pcp.get(flow, {}),
            "pcp_h2": f["pcp"], "received": f["received"],
            "lost": f["lost"], "misclassified": f["received"] - right,
        })
    classified = sum(r["received"] - r["misclassified"] for r in rows)
    return rows, classified / seconds if seconds else 0.0
