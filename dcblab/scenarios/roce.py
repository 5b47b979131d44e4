"""RoCEv2 through the fabric (docs/roce.md): soft-RoCE (rxe0 on each
host's eth0, topology key ``rdma``) runs perftest's RDMA writes and sends
from h1 and h2 to h3 across sw's congested port. Used by
tests/test_roce.py, ``dcblab demo roce`` and ``dcblab bench``.

How a RoCE packet gets its priority, as deployed: perftest asks rdma_cm
for a ToS (``-T``: DSCP 26 << 2), and rxe writes it into the IP header
of the QP's RDMA writes (not of rdma_cm's MADs nor of perftest's
exchange over its own QP: those were ToS 0 in every capture,
docs/roce.md); dcbapp-netprio on the host turns the APP entries sw
advertised by DCBX into nftables output rules (UDP port 4791 and DSCP
26 -> priority 3, on eth0 and its VLANs), since rxe sends from kernel
sockets that no net_prio cgroup holds; priority 3 picks the TC's TX
queues on eth0 (and PCP 3 on a VLAN); sw's ports trust DSCP, then PCP,
so a packet has priority 3 on sw when it carries DSCP 26 or is tagged
with PCP 3 (the ToS-0 ones: the streams under load run on VLAN 100),
and waits in the ETS band of TC 2, where PFC pauses the senders'
priority 3 instead of dropping (write_streams with pfc False: the
band a lossy class, which drops).

What is counted where: perftest's own bandwidth and latency; rxe's
counters (``rdma statistic``) on both ends of each QP, before and after;
sw's DSCP trust filter per ingress port (its skbedit counts the packets
it gave the priority) and the congested port's bands (packets, drops);
the senders' TX queues of the TC (ethtool -S, per queue).
"""

import concurrent.futures
import contextlib
import json
import threading
import time
from dataclasses import dataclass, field

from ..guest.agent import AgentError, AgentTimeout
from ..lab import start_dcbapp, stop_dcbapp
from ..lab.switch import ETS_HANDLE, pfc_thresholds
from ..testing.dcb import parse_tx_queue_packets, wait_for
from .fabric import (class_stats, congested_port, offer, parse_class_stats,
                     pinned_neighbours)
from .pfc import band_of, pfc_counters, set_switch_pfc

__all__ = ["RXE", "ERROR_COUNTERS", "rxe_stats", "roce_dscp", "Stream",
           "StreamsResult", "write_streams", "dscp_filter_packets",
           "parse_dscp_filter_packets", "parse_rxe_stats",
           "dscp_rules", "port_rules", "app_rules", "port_apps",
           "parse_bw", "roce_apps", "LatencyResult",
           "send_latency", "parse_lat_avg", "wait_listening",
           "start_perftest", "lossy_band_packets"]

RXE = "rxe0"
# rxe's counters that say a packet was lost, late or sent twice: the
# requester's sequence errors (a NAK), its retries on a timeout or NAK,
# the responder's duplicates and out-of-sequence requests, and QPs that
# ran out of retries.
ERROR_COUNTERS = ("rcvd_seq_err", "completer_retry_err", "duplicate_request",
                  "out_of_seq_request", "retry_exceeded_err")
# perftest's rdma_cm port of the first stream; one per stream after it.
PORT = 18515
SIZE = 65536            # bytes per RDMA write
# RDMA payload per packet: ibv_devinfo's active_mtu of rxe on a
# 1500-byte Ethernet MTU (a 64 KiB write is 64 packets).
ROCE_MTU = 1024
# What a stream's run holds besides the window: the connects (one
# after the other) and a second before the window.
STARTUP_S = 8
# ... and the two samples of the counters around the window: up to ~5 s
# each under TCG (a CI run: sw's `tc -s filter show` took 2 s per
# port), the measured QP has to outlive the second one.
READS_S = 10
# ... and, with load, its start (until the congested port sends it).
LOAD_START_S = 5
# QP timeout 4.096 us x 2^U: 2^18 ~ 1.07 s. With perftest's default (14,
# 67 ms) rxe retried on a quiet two-host lab under TCG (a capture
# running in the receiver): a TCG guest can hold an ACK longer than that
# (docs/roce.md, "What rxe under TCG does").
QP_TIMEOUT = 18
# perftest -R's QPs per client: its exchange's, then the measured one.
PERFTEST_QPS = 2
# What perftest prints when ib_cm rejected its second connect for want of
# a listener (start_perftest).
CM_RACE = "RDMA_CM_EVENT_REJECTED; error: 8"
NFT = "/usr/sbin/nft"
# A full Ethernet frame with its 802.1Q tag, bytes.
FRAME = 1522


def rxe_stats(guest, dev=RXE):
    """rxe's counters of dev's port 1 (`rdma statistic show link`)."""
    return parse_rxe_stats(guest.run(["rdma", "-j", "statistic", "show",
                                      "link", f"{dev}/1"]).stdout)


def parse_rxe_stats(out):
    """rxe_stats() of `rdma -j statistic show link` output."""
    return {k: v for k, v in json.loads(out)[0].items()
            if isinstance(v, int) and k != "port"}


def _delta(a, b):
    return {k: b[k] - a.get(k, 0) for k in b}


def roce_apps(topology, prio=None):
    """The DSCP APP entries of the congested port (sw advertises them):
    [(dscp, priority)], those of priority prio only when given."""
    _, port, _ = congested_port(topology)
    return [(a.protocol, a.priority) for a in port.dcb.apps
            if a.selector == "dscp" and (prio is None or a.priority == prio)]


def roce_dscp(topology, prio=3):
    """The DSCP the fabric gives priority prio (its APP entry)."""
    apps = roce_apps(topology, prio)
    if not apps:
        raise ValueError(f"{topology.path}: no APP DSCP entry gives "
                         f"priority {prio}")
    return apps[0][0]


def parse_bw(out):
    """(iterations, MiB/s average) of an ib_write_bw report."""
    return _perftest_row(out, "#bytes", (1, 3), (int, float))


def _perftest_row(out, head, cols, types):
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith(head) and i + 1 < len(lines):
            words = lines[i + 1].split()
            try:
                return tuple(t(words[c]) for c, t in zip(cols, types))
            except (IndexError, ValueError):
                break
    raise ValueError(f"no perftest result row in: {out[-400:]!r}")


def dscp_filter_packets(guest, dev, dscp):
    """Packets sw's DSCP trust filters of dev gave a priority, for dscp
    (all four: IPv4, IPv6, untagged and tagged; handle DSCP + 1)."""
    return parse_dscp_filter_packets(
        guest.run(["tc", "-s", "-j", "filter", "show", "dev", dev,
                   "ingress"]).stdout, dscp)


def parse_dscp_filter_packets(out, dscp):
    """dscp_filter_packets() of `tc -s -j filter show` output."""
    n = 0
    for f in json.loads(out):
        opts = f.get("options", {})
        if opts.get("handle") != dscp + 1 or "ip_tos" not in \
                opts.get("keys", {}):
            continue
        n += sum(a.get("stats", {}).get("packets", 0)
                 for a in opts.get("actions", []))
    return n


def app_rules(guest):
    """The rules of dcbapp-netprio's table, as `nft -n list table inet
    dcbapp` prints them (DSCP in hex: 0x1a; protocols as numbers:
    `meta l4proto { 17, 33 } th dport 4791`)."""
    res = guest.run([NFT, "-n", "list", "table", "inet", "dcbapp"],
                    check=False)
    return [ln.strip() for ln in res.stdout.splitlines()
            if "meta priority set" in ln] if res.rc == 0 else []


def dscp_rules(guest):
    """app_rules() of the DSCP entries."""
    return [ln for ln in app_rules(guest) if " dscp " in ln]


def port_rules(guest):
    """app_rules() of the port entries (a destination port)."""
    return [ln for ln in app_rules(guest) if " dport " in ln]


def port_apps(topology):
    """The port APP entries of the congested port (sw advertises them):
    [(port, priority)]; the fabric's UDP 4791 (RoCEv2) -> 3."""
    _, port, _ = congested_port(topology)
    return [(a.protocol, a.priority) for a in port.dcb.apps
            if a.selector in ("stream-port", "dgram-port", "port")]


@dataclass
class Stream:
    """One ib_write_bw stream: perftest's own figures over its run."""
    src: str
    dst: str
    port: int
    iterations: int = 0
    mib_s: float = 0.0                   # perftest's average, its run
    sent_pkts: int = 0                   # rxe's on src, in the window
    # its measured QP was still connected after the window's second
    # sample (both of perftest's QPs in RTS); perftest's exit
    # status and, when it failed, the last line it wrote to stderr
    # (rxe gave up: "transport retry counter exceeded")
    through_window: bool = True
    rc: int = 0
    failure: str = ""

    @property
    def mbit_s(self):
        return self.mib_s * 8 * 1.048576


@dataclass
class StreamsResult:
    """RoCE streams measured over a window of `window` seconds in the
    middle of their runs (with load: while the load ran): everything
    below counts that window only, from the kernel's counters."""
    pfc: bool
    window: float
    dscp: int
    prio: int
    vlan: object                          # None: untagged
    loaded: bool                          # bulk PCPs beside them
    streams: list
    # rxe's responder on the receiver: packets it took in order, and
    # each error counter of ERROR_COUNTERS, both ends summed
    accepted: int = 0
    errors: dict = field(default_factory=dict)
    band_bytes: int = 0                   # the RoCE band at the port
    band_packets: int = 0
    band_drops: int = 0
    other_drops: int = 0                  # the other bands
    trusted: dict = field(default_factory=dict)  # {sw port: packets}
    indications: dict = field(default_factory=dict)  # {host: PFC frames}
    bulk_mbit_s: dict = field(default_factory=dict)  # {pcp: at rx}
    tx_queues: dict = field(default_factory=dict)  # {host: {q: packets}}
    connect_retries: int = 0              # start_perftest's
    # the RoCE band's pfifo without PFC (lossy_band_packets), packets;
    # None: the lossless band's bfifo (pfc_thresholds: xoff + headroom)
    band_limit: object = None
    # Without load, the same counters over the whole run, from before
    # the connects to after perftest's exit, when no RoCE packet is in
    # flight: {"sent": {host: rxe's sent_pkts}, "tx_queues", "trusted",
    # "band_packets", "band_drops"}. A stream's counts on two guests
    # agree there to the packet; the window's, read on each guest at a
    # slightly different instant, do not. None with load.
    run: object = None

    @property
    def goodput_mbit_s(self):
        """RDMA payload the receiver's rxe took in order, Mbit/s."""
        return self.accepted * ROCE_MTU * 8 / self.window / 1e6

    @property
    def throughput_mbit_s(self):
        """What the congested port sent of the RoCE band (retries and
        headers included), Mbit/s."""
        return self.band_bytes * 8 / self.window / 1e6

    @property
    def error_total(self):
        return sum(self.errors.values())

    def as_json(self):
        return {**{k: v for k, v in vars(self).items() if k != "streams"},
                "streams": [{**vars(s), "mbit_s": s.mbit_s}
                            for s in self.streams],
                "goodput_mbit_s": self.goodput_mbit_s,
                "throughput_mbit_s": self.throughput_mbit_s}


def wait_listening(guest, ports, timeout=20.0):
    """Until rdma_cm listens on every port (perftest servers)."""
    def listening():
        out = json.loads(guest.run(["rdma", "-j", "resource", "show",
                                    "cm_id"]).stdout)
        return {int(c["src-addr"].rsplit(":", 1)[1]) for c in out
                if c.get("state") == "LISTEN" and "src-addr" in c}
    wait_for(f"{guest.name}: perftest listening on rdma_cm ports {ports}",
             listening, lambda got: set(ports) <= got, timeout=timeout,
             interval=0.2)


def _qp_states(guest):
    out = json.loads(guest.run(["rdma", "-j", "resource", "show",
                                "qp"]).stdout)
    return [q.get("state") for q in out if q.get("comm") in
            ("ib_write_bw", "ib_send_lat")]


def _connected(guest):
    """Whether guest's perftest has its measured QP connected: both of
    its QPs in state RTS (PERFTEST_QPS)."""
    return _qp_states(guest).count("RTS") >= PERFTEST_QPS


def start_perftest(g_srv, g_cli, argv, address, port, tries=3):
    """A perftest server (argv) on g_srv and its client (argv, address)
    on g_cli: (server, client, retries) once the client's measured QP is
    connected. perftest -R connects twice to the server's port, first
    for its own exchange (a QP of its own, without -T's ToS), then the
    measured QP; between the two the server closes its listening cm_id
    and opens a new one, and a client whose second REQ comes first is
    rejected by ib_cm: no listener, REJ reason 8 (seen with the ib_cma
    tracepoints: the REQ 3 ms before the new listen, in about one
    connect of eight under TCG). That client exits (SIGSEGV) and its
    server waits for it forever: both are killed and started again, at
    most tries times, and the retries counted."""
    for attempt in range(tries):
        server = g_srv.spawn(argv)
        client = None
        try:
            wait_listening(g_srv, [port])
            client = g_cli.spawn([*argv, address])
            st, _ = wait_for(
                f"{g_cli.name}: perftest's measured QP connected",
                lambda: _qp_states_alive(g_cli, client),
                lambda v: v[0].count("RTS") >= PERFTEST_QPS or not v[1],
                timeout=30, interval=0.2)
        except BaseException:
            _reap(g_cli, [client] if client else [])
            _reap(g_srv, [server])
            raise
        if st[1]:
            return server, client, attempt
        res = g_cli.wait(client, timeout=10, check=False)
        _reap(g_srv, [server])
        if CM_RACE not in res.stderr or attempt == tries - 1:
            last = [ln for ln in res.stderr.splitlines() if ln.strip()]
            raise AgentError(f"{g_cli.name}: {argv[0]} to {address} port "
                             f"{port} exited {res.rc} before its QP "
                             f"connected (try {attempt + 1} of {tries}): "
                             f"{' / '.join(last[-3:])}")
    raise AssertionError("unreachable")


def _qp_states_alive(guest, spawned):
    """(perftest's QP states, whether spawned still runs): one command."""
    # a zombie (exited, not yet reaped by the agent) is not alive
    out = guest.run(["sh", "-c", "rdma -j resource show qp; s=; "
                     f"while read -r k v _; do [ \"$k\" = State: ] && "
                     f"s=$v && break; done < /proc/{spawned.pid}/status; "
                     "[ -n \"$s\" ] && [ \"$s\" != Z ] && echo alive"],
                    check=False).stdout
    lines = out.splitlines()
    qps = json.loads(lines[0]) if lines else []
    return ([q.get("state") for q in qps
             if q.get("comm") in ("ib_write_bw", "ib_send_lat")],
            "alive" in lines[1:])


def _wait_or_kill(guest, spawned, timeout):
    """spawned's result once it exited within timeout seconds, else
    None: killed."""
    try:
        return guest.wait(spawned, timeout=timeout, check=False)
    except AgentTimeout:
        _reap(guest, [spawned])
        return None


def _reap(guest, spawned):
    """Servers left by a failed run: killed (their QPs go with them)."""
    for s in spawned:
        guest.run(["kill", str(s.pid)], check=False)
        try:
            guest.wait(s, timeout=30, check=False)
        except AgentError:      # already reaped: the wait that failed
            pass


def _perftest(tool, tos, port, seconds=None, extra=()):
    argv = [tool, "-R", "-d", RXE, "-p", str(port), "-T", str(tos), "-F",
            "-u", str(QP_TIMEOUT), *extra]
    if seconds:
        argv += ["-D", str(int(seconds))]
    return argv


def _with_dcbapp(lab, hosts):
    """Start dcbapp-netprio on each host (eth0 and its VLANs) and wait
    until its rules are in: what turns sw's APP entries, learnt by DCBX,
    into the priority of rxe's packets: DSCP 26 -> 3 (the QP's RDMA
    writes) and UDP port 4791 -> 3 (every RoCEv2 packet, the ToS-0 ones
    of rdma_cm and of perftest's exchange included)."""
    dscps = [d for d, _ in roce_apps(lab.topology)]
    ports = [p for p, _ in port_apps(lab.topology)]
    for h in hosts:
        start_dcbapp(lab.guest(h).machine, "--dev", "eth0")
    for h in hosts:
        g = lab.guest(h)
        wait_for(f"{h}: dcbapp-netprio's rules for DSCP {dscps} and "
                 f"ports {ports}", lambda g=g: app_rules(g),
                 lambda r: all(any(f"dscp {d:#x} " in ln for ln in r)
                               for d in dscps)
                 and all(any(f"dport {p} " in ln for ln in r)
                         for p in ports), timeout=20)


def _stop_dcbapp(lab, hosts):
    for h in hosts:
        stop_dcbapp(lab.guest(h).machine)


def _start_load(lab, lossy, load, seconds, warmup, **kw):
    """fabric.offer(lossy PCPs at load x the port's rate) in a thread,
    returned once the congested port's band of lossy[0] sends; the
    offer's result lands in the returned dict under "r" when the thread
    ends."""
    sw, port, _ = congested_port(lab.topology)
    g_sw = lab.guest(sw.name)
    cid = band_of(port.dcb, lossy[0])
    got = {}

    def run():
        got["r"] = offer(lab, lossy, load=load, seconds=seconds,
                         warmup=warmup, **kw)

    def sent():
        return class_stats(g_sw, port.name).get(cid, {}).get("packets", 0)
    first = sent()
    thread = threading.Thread(target=run)
    thread.start()
    wait_for(f"{sw.name}:{port.name}: load on priority {lossy[0]}", sent,
             lambda n: n > first + 200, timeout=30, interval=0.25)
    return thread, got


def lossy_band_packets(port):
    """The buffer write_streams(pfc=False) gives the RoCE band of the
    congested port, in packets: what the band holds before pfcd would
    pause the senders (its XOFF threshold), without the headroom a
    switch reserves only for a PFC class. rxe keeps up to 128 packets
    of a QP in flight, so two streams overflow it."""
    return max(pfc_thresholds(port)[0] // FRAME, 2)


@contextlib.contextmanager
def _lossy_band(g_sw, port, band):
    """The RoCE band of port as a lossy class: once pfcd has removed its
    bfifo (PFC is off), a pfifo of lossy_band_packets() (pfcd manages
    bfifos only, so it keeps this one); on exit the band gets the ets
    qdisc's default child back, for pfcd to make lossless again."""
    limit = lossy_band_packets(port)

    def children():
        out = json.loads(g_sw.run(["tc", "-j", "qdisc", "show", "dev",
                                   port.name]).stdout)
        return {q.get("kind") for q in out if q.get("parent") == band}
    wait_for(f"{port.name}: band {band} without its lossless bfifo",
             children, lambda k: "bfifo" not in k, timeout=15)
    g_sw.run(["tc", "qdisc", "replace", "dev", port.name, "parent", band,
              "pfifo", "limit", str(limit)])
    try:
        yield limit
    finally:
        g_sw.run(["tc", "qdisc", "del", "dev", port.name, "parent", band],
                 check=False)


def _sections(out):
    """{name: text} of a script's output whose parts each follow a line
    `@@ name`."""
    parts, name = {}, None
    for line in out.splitlines():
        if line.startswith("@@ "):
            name = line[3:].strip()
            parts[name] = []
        elif name is not None:
            parts[name].append(line)
    return {k: "\n".join(v) for k, v in parts.items()}


def _sender_sample(guest, dev="eth0"):
    """A sender's rxe counters, TX queue packets and PFC counters of dev,
    read by one command (rxe's first, the rest within ~0.2 s)."""
    out = guest.run(["sh", "-c",
                     f"echo '@@ rxe'; rdma -j statistic show link {RXE}/1 "
                     f"&& echo '@@ ethtool' && ethtool -S {dev} "
                     f"&& echo '@@ pfc' && dcb -j -s pfc show dev {dev}"]
                    ).stdout
    parts = _sections(out)
    return dict(rxe=parse_rxe_stats(parts["rxe"]),
                queues=parse_tx_queue_packets(parts["ethtool"]),
                indications=json.loads(parts["pfc"])["indications"])


def _sw_sample(g_sw, port, facing, dscp):
    """({classid: stats} of port, {facing port: dscp_filter_packets}),
    read by one tc (a batch): classes print as text (iproute2 6.1 has no
    JSON for them), each port's filters as one JSON line."""
    batch = [f"class show dev {port}"] + \
        [f"filter show dev {p} ingress" for p in facing]
    out = g_sw.run(["tc", "-s", "-j", "-b", "-"],
                   input="\n".join(batch) + "\n").stdout
    lines = out.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("["))
    filters = lines[first:]
    if len(filters) != len(facing):
        raise ValueError(f"sw: tc batch printed {len(filters)} filter "
                         f"lists for {len(facing)} ports: {out[-400:]!r}")
    return (parse_class_stats("\n".join(lines[:first]) + "\n"),
            {p: parse_dscp_filter_packets(f, dscp)
             for p, f in zip(facing, filters)})


def _sample(lab, senders, rx, prio, dscp):
    """The counters write_streams compares, of every guest: rxe's, the
    senders' TX queues and PFC indications of prio, sw's congested port
    classes and DSCP trust filters. Each guest's read in parallel: under
    the load a guest command takes up to a second (TCG), and the reads
    one after the other took ~5 s; and each guest's in one command (sw:
    one tc batch). Still not at one instant: a guest's read starts up to
    ~0.5 s after another's, and a window's counts of one stream on two
    guests differed by up to 7% (write_streams' `run` counts have no
    such edges). t: when the receiver's rxe counters (the goodput) were
    read."""
    sw, port, _ = congested_port(lab.topology)
    g_sw, g_rx = lab.guest(sw.name), lab.guest(rx)
    facing = [p.name for p in sw.nics]

    def at_rx():
        return rxe_stats(g_rx), time.monotonic()

    def at_sender(h):
        s = _sender_sample(lab.guest(h))
        return s["rxe"], s["queues"], s["indications"][prio]

    with concurrent.futures.ThreadPoolExecutor() as pool:
        rx_f = pool.submit(at_rx)
        snd = {h: pool.submit(at_sender, h) for h in senders}
        sw_f = pool.submit(_sw_sample, g_sw, port.name, facing, dscp)
        (rx_stats, t), (cls_now, f_now) = rx_f.result(), sw_f.result()
        snd = {h: f.result() for h, f in snd.items()}
    return dict(rxe={rx: rx_stats, **{h: v[0] for h, v in snd.items()}},
                q={h: v[1] for h, v in snd.items()}, cls=cls_now,
                f=f_now, ind={h: v[2] for h, v in snd.items()}, t=t)


def write_streams(lab, *, senders=("h1", "h2"), seconds=10.0, prio=3,
                  vlan=None, load=0.0, lossy=(0, 2), pfc=True):
    """An RDMA write stream (ib_write_bw, 64 KiB writes) from each sender
    to the congested port's host, at the DSCP the fabric gives prio,
    untagged (vlan None) or on a VLAN, measured over a window of seconds
    once all are connected; with load, lossy PCPs offered at load x the
    port's rate from the senders (fabric.offer) from before the window
    to after it; with pfc False, sw's ports have PFC off for the run
    and the congested port's RoCE band a lossy class's buffer,
    lossy_band_packets() (the negative control)."""
    topo = lab.topology
    sw, port, rx = congested_port(topo)
    g_sw, g_rx = lab.guest(sw.name), lab.guest(rx)
    dscp = roce_dscp(topo, prio)
    tos = dscp << 2
    hosts = (*senders, rx)
    facing = {p.name: p.peer.split(":")[0] for p in sw.nics}
    ports = [PORT + i for i in range(len(senders))]
    band = band_of(port.dcb, prio)
    # perftest's run: the connects, the load's start, the window and its
    # samples; a stream whose QP is gone at the second sample's end
    # (through_window False) fails the scenario's tests.
    run_s = int(seconds + STARTUP_S + READS_S
                + (LOAD_START_S if load else 0))
    dst = topo.address(rx, vlan=vlan)
    servers, clients, bulk, loader, retries = [], [], {}, None, 0
    band_limit = None
    pins = contextlib.ExitStack()
    try:
        if not pfc:
            set_switch_pfc(lab, sw, [])
            # the hosts (willing) take it by DCBX: their drivers no
            # longer pause nor cap a TX ring for PFC
            for h in hosts:
                wait_for(f"{h}: PFC off by DCBX",
                         lambda g=lab.guest(h): pfc_counters(g, "eth0")
                         ["prio_pfc"], lambda m: not any(m), timeout=20)
            band_limit = pins.enter_context(_lossy_band(g_sw, port, band))
        _with_dcbapp(lab, hosts)
        start = None if load else _sample(lab, senders, rx, prio, dscp)
        # ARP is priority 0: in an overloaded best-effort band a
        # re-resolution of h3's address is lost, and rxe's packets wait
        # for it (seen: a stream stalled for the whole load, its 64
        # packets in flight stuck). Pinned for the run, as fabric.offer
        # does on the VLAN.
        if load:
            pins.enter_context(pinned_neighbours(lab, senders, rx, vlan))
        # One connection at a time, each through start_perftest: two
        # clients connecting to h3 at the same moment had one of them
        # rejected (REJ reason 8, the race start_perftest retries) in
        # each of three tries (docs/roce.md).
        # rdma_cm's MADs carry no DSCP (priority 0), so they are made
        # before the load: in an overloaded best-effort band they are
        # lost and retried for seconds.
        for h, p in zip(senders, ports):
            sv, cl, n = start_perftest(
                g_rx, lab.guest(h), _perftest("ib_write_bw", tos, p, run_s,
                                              ("-s", str(SIZE))), dst, p)
            servers.append(sv)
            clients.append((h, cl))
            retries += n
        if load:
            loader, bulk = _start_load(lab, lossy, load, seconds + 5, 1.5,
                                       senders=senders)
        time.sleep(1.0)

        a = _sample(lab, senders, rx, prio, dscp)
        time.sleep(seconds)
        b = _sample(lab, senders, rx, prio, dscp)
        alive = {h: _connected(lab.guest(h)) for h in senders}
        outs = [(h, lab.guest(h).wait(c, timeout=run_s + 90, check=False))
                for h, c in clients]
        clients = []
        # A server whose client died waits for it: killed after a while.
        for sv in servers:
            _wait_or_kill(g_rx, sv, 0 if any(r.rc for _, r in outs)
                          else 60)
        servers = []
        end = None if load else _sample(lab, senders, rx, prio, dscp)
    finally:
        if loader:
            loader.join()
        pins.close()
        for h, c in clients:
            _reap(lab.guest(h), [c])
        _reap(g_rx, servers)
        _stop_dcbapp(lab, hosts)
        if not pfc:
            set_switch_pfc(lab, sw, port.dcb.pfc)
    d = {h: _delta(a["rxe"][h], b["rxe"][h]) for h in hosts}
    streams = []
    for (h, res), p in zip(outs, ports):
        try:
            it, mib = parse_bw(res.stdout)
        except ValueError:
            if res.rc == 0:
                raise
            it, mib = 0, 0.0
        err = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
        streams.append(Stream(h, rx, p, it, mib, d[h].get("sent_pkts", 0),
                              alive[h], res.rc,
                              err[-1] if res.rc and err else ""))

    def cls(key, cid, a=a, b=b):
        return b["cls"].get(cid, {}).get(key, 0) - \
            a["cls"].get(cid, {}).get(key, 0)
    run = None
    if start is not None:
        run = dict(
            sent={h: end["rxe"][h].get("sent_pkts", 0)
                  - start["rxe"][h].get("sent_pkts", 0) for h in senders},
            tx_queues={h: _delta(start["q"][h], end["q"][h])
                       for h in senders},
            trusted={p: end["f"][p] - start["f"][p] for p in facing},
            band_packets=cls("packets", band, start, end),
            band_drops=cls("drops", band, start, end))
    others = [c for c in b["cls"] if c.startswith(ETS_HANDLE) and c != band]
    dr = d[rx]
    return StreamsResult(
        pfc=pfc, window=b["t"] - a["t"], dscp=dscp, prio=prio, vlan=vlan,
        loaded=bool(load), streams=streams,
        accepted=(dr.get("rcvd_pkts", 0) - dr.get("duplicate_request", 0)
                  - dr.get("out_of_seq_request", 0)),
        errors={k: sum(d[h].get(k, 0) for h in hosts)
                for k in ERROR_COUNTERS},
        band_bytes=cls("bytes", band), band_packets=cls("packets", band),
        band_drops=cls("drops", band),
        other_drops=sum(cls("drops", c) for c in others),
        trusted={p: b["f"][p] - a["f"][p] for p in facing},
        indications={h: b["ind"][h] - a["ind"][h] for h in senders},
        bulk_mbit_s=({p: v / 1e6 for p, v in bulk["r"].got_bps.items()}
                     if "r" in bulk else {}),
        tx_queues={h: _delta(a["q"][h], b["q"][h]) for h in senders},
        connect_retries=retries, band_limit=band_limit, run=run)


def parse_lat_avg(out):
    """(iterations, t_avg us) of an ib_send_lat report in duration mode
    (-D), which gives the average only."""
    return _perftest_row(out, "#bytes", (1, 2), (int, float))


@dataclass
class LatencyResult:
    """ib_send_lat round trips at one DSCP, its run mostly under load."""
    prio: int                      # the priority the DSCP maps to (0: none)
    dscp: int
    loaded: bool
    seconds: int
    iterations: int
    t_avg_us: float                # perftest: average one-way latency
    errors: dict = field(default_factory=dict)   # rxe's, both ends

    def as_json(self):
        return vars(self)


def send_latency(lab, *, prio=5, src="h1", seconds=16, load=1.2,
                 lossy=(0, 2), size=64):
    """ib_send_lat from src to the congested port's host for seconds, at
    the DSCP the fabric gives prio, connected first and then (load) with
    lossy PCPs offered at load x the port's rate from h1 and h2 for the
    rest of the run.
    perftest measures the middle (its 2 s margins off), so the load,
    on ~2 s after the connect, covers nearly all of what is measured;
    duration mode reports the average only. A prio without an APP DSCP
    entry is RoCE left to best effort: DSCP 0, and no dcbapp-netprio on
    the hosts (its UDP 4791 rule would give every RoCEv2 packet
    priority 3)."""
    topo = lab.topology
    _, _, rx = congested_port(topo)
    apps = {p: d for d, p in roce_apps(topo)}
    dscp = apps.get(prio, 0)
    tos = dscp << 2
    g_rx, g_src = lab.guest(rx), lab.guest(src)
    hosts = (src, rx)
    lat_port = PORT + 7
    server, client, loader = None, None, None
    pins = contextlib.ExitStack()
    try:
        if dscp:
            _with_dcbapp(lab, hosts)
        if load:
            pins.enter_context(pinned_neighbours(lab, [src], rx, None))
        extra = ("-s", str(size))
        before = {h: rxe_stats(lab.guest(h)) for h in hosts}
        server, client, _ = start_perftest(
            g_rx, g_src, _perftest("ib_send_lat", tos, lat_port, seconds,
                                   extra), topo.address(rx), lat_port)
        if load:
            loader, _ = _start_load(lab, lossy, load, seconds, 1.0)
        res = g_src.wait(client, timeout=seconds + 90)
        client = None
        _wait_or_kill(g_rx, server, 30)
        server = None
        after = {h: rxe_stats(lab.guest(h)) for h in hosts}
    finally:
        if loader:
            loader.join()
        pins.close()
        _reap(g_src, [client] if client else [])
        _reap(g_rx, [server] if server else [])
        if dscp:
            _stop_dcbapp(lab, hosts)
    it, avg = parse_lat_avg(res.stdout)
    errs = {k: sum(after[h][k] - before[h][k] for h in hosts)
            for k in ERROR_COUNTERS}
    return LatencyResult(prio if dscp else 0, dscp, bool(load), seconds, it,
                         avg, errs)
