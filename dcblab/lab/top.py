"""`dcblab top`'s numbers, without curses: per port of each machine, TX
per traffic class, RX per PCP (switch ports) or in all (host NICs),
drops, backlog and the DCBX state; the CLI (cli/top.py) draws them.

Each machine is read by one sh script per sample, run by its agent; it
only reads (counters, sysfs, `dcb show`, `lldptool -t`), it never
installs anything. The machines are read in parallel threads. A rate is
the difference of two samples over the host's time between them (each
stamped when its command is sent), so a guest clock that runs slow
(docs/fabric.md, "Clocks") does not skew it.

Where the numbers come from:
- host NIC TX per TC: `ethtool -S` per-queue counters, a queue's TC from
  /sys/class/net/DEV/queues/tx-N/traffic_class (the driver partitions the
  queues by the ETS prio_tc; no file, or no TCs set: TC 0);
- switch port TX per TC: `tc -s class show`, the bands of the ETS qdisc
  (band -> TC: port_bands() of the DCB the port runs, which pfcd makes
  the qdisc follow), with their drops and backlog;
- switch port DCB: what the port runs (`dcb -j ets show`, `pfc show`)
  beside what the topology file says;
- switch port RX per PCP: the counters of its trust filters' skbedit
  actions (`tc -s filter show ... ingress`, one flower filter per PCP);
- totals and the devices' own drops: /sys/class/net/DEV/statistics;
- DCBX (topologies with dcbx = true): lldptool's ETS-CFG willing, and for
  a host NIC facing a switch port whether `dcb ets show` equals the ETS
  the port runs (what it advertises; the file's when the switch is not
  read): adopted.
"""

import concurrent.futures
import json
import re
import time

from ..core.errors import DcblabError
from .runs import LabError
from ..topology.model import PortDcb
from .dcbstate import dcb_batch_lines, file_dcb, parse_dcb_batch
from .switch import ETS_HANDLE, port_bands

__all__ = ["Top", "sample_script", "parse_sample", "STATS", "running_dcb"]

# Full paths: busybox sh runs its own applets (tc, ...) before PATH.
_TC, _DCB, _ETHTOOL = "/sbin/tc", "/sbin/dcb", "/sbin/ethtool"
_LLDPTOOL = "/usr/sbin/lldptool"
STATS = ("rx_bytes", "rx_packets", "rx_dropped", "tx_bytes", "tx_packets",
         "tx_dropped")
_SECTION = re.compile(r"^@@ (\w+) (\S+)$")
_TXQ = re.compile(r"^\s*tx_queue_(\d+)_(bytes|packets): (\d+)$", re.M)
_CLASS = re.compile(r"^class \S+ (\S+) .*\n Sent (\d+) bytes (\d+) pkt "
                    r"\(dropped (\d+),.*\n backlog (\d+)b (\d+)p", re.M)
_WILLING = re.compile(r"willing\s*=\s*(yes|no)")


def sample_script(host, dcbx):
    """The sh script reading all of host's counters: sections of output,
    each after a line `@@ KIND DEV`. The counters come first, read within
    a few milliseconds of the script's start (the time a sample is
    stamped with); the slower DCBX queries after them."""
    sh, slow = [], []
    for nic in host.nics:
        dev = nic.name
        sh.append(f"echo '@@ stat {dev}'; for f in {' '.join(STATS)}; do "
                  f"read v < /sys/class/net/{dev}/statistics/$f; "
                  "echo \"$f $v\"; done")
        if not host.is_switch:
            sh.append(f"echo '@@ queues {dev}'; for q in "
                      f"/sys/class/net/{dev}/queues/tx-*; do t=; "
                      "read t 2>/dev/null < $q/traffic_class; "
                      "echo \"${q##*-} $t\"; done")
            sh.append(f"echo '@@ ethtool {dev}'; {_ETHTOOL} -S {dev}")
            if dcbx and nic.peer_is_switch:
                slow.append(f"echo '@@ ets {dev}'; "
                            f"{_DCB} -j ets show dev {dev}")
        if dcbx:
            slow.append(f"echo '@@ willing {dev}'; {_LLDPTOOL} -t -i {dev} "
                        "-V ETS-CFG -c willing")
    dcb_ports = [n.name for n in host.nics if n.dcb] if host.is_switch \
        else []
    if dcb_ports:
        # One dcb for all ports: its objects, comma-separated.
        slow.append(f"echo '@@ dcb -'; {_DCB} -j -b - <<'EOF'\n"
                    + dcb_batch_lines(dcb_ports) + "EOF")
    if host.is_switch:
        # One tc for all ports (each tc run costs ~0.15 s under TCG): per
        # port its classes (text: iproute2 6.1 has no JSON for them), then
        # its ingress filters as one JSON line, which ends the port.
        batch = [line for nic in host.nics for line in
                 (f"class show dev {nic.name}",
                  f"filter show dev {nic.name} ingress")]
        sh.append(f"echo '@@ tc -'; {_TC} -s -j -b - <<'EOF'\n"
                  + "\n".join(batch) + "\nEOF")
    return "\n".join(sh + slow) + "\n"


def _sections(text):
    out, key = {}, None
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m:
            key = (m[1], m[2])
            out[key] = []
        elif key:
            out[key].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def _int(s):
    try:
        return int(s)
    except ValueError:
        return None


def parse_sample(host, text):
    """{dev: counters} from sample_script's output; a part that is
    missing (a command failed) is None or absent, never a guess."""
    sec = _sections(text)
    ports = {}
    for nic in host.nics:
        dev = nic.name
        p = ports[dev] = {}
        stat = dict(ln.split(" ", 1) for ln in
                    sec.get(("stat", dev), "").splitlines() if " " in ln)
        p["stats"] = {k: _int(stat.get(k, "")) for k in STATS}
        if ("ethtool", dev) in sec:
            q = {}
            for n, kind, v in _TXQ.findall(sec[("ethtool", dev)]):
                q.setdefault(int(n), {})[kind] = int(v)
            p["queues"] = q
            tcs = {}
            for ln in sec.get(("queues", dev), "").splitlines():
                n, _, tc = ln.partition(" ")
                if _int(n) is not None:
                    tcs[int(n)] = _int(tc.strip()) or 0
            p["queue_tc"] = tcs
        if ("ets", dev) in sec:
            try:
                p["ets"] = json.loads(sec[("ets", dev)])
            except ValueError:
                p["ets"] = None
        if ("willing", dev) in sec:
            m = _WILLING.search(sec[("willing", dev)])
            p["willing"] = m[1] == "yes" if m else None
    if host.is_switch:
        _parse_tc(host, sec.get(("tc", "-"), ""), ports)
    if ("dcb", "-") in sec:
        _parse_dcb(host, sec[("dcb", "-")], ports)
    return ports


def _parse_dcb(host, text, ports):
    """The `dcb -j -b` objects into each DCB port's "dcb": the
    configuration it runs."""
    devs = [n.name for n in host.nics if n.dcb]
    for dev, dcb in parse_dcb_batch(text, devs).items():
        ports[dev]["dcb"] = dcb


def running_dcb(nic, sample):
    """The DCB a switch port runs (its sample's), as a PortDcb, or the
    topology's when it was not read. A TSA other than ets is served as
    strict (tools/swets.h)."""
    run = sample.get("dcb")
    if not run:
        return nic.dcb
    return PortDcb(prio_tc=tuple(run["prio_tc"]),
                   tsa=tuple(t if t == "ets" else "strict"
                             for t in run["tc_tsa"]),
                   bw=tuple(run["tc_bw"]), pfc=tuple(run["pfc"]), apps=())


def _parse_tc(host, text, ports):
    """The tc batch's output into each port's bands and per-PCP counters;
    ports after one whose filters did not print (tc stops at an error)
    get neither."""
    classes = []
    nics = iter(host.nics)
    for line in text.splitlines():
        if not line.startswith("["):
            classes.append(line)
            continue
        nic = next(nics, None)
        if nic is None:
            break
        p = ports[nic.name]
        p["bands"] = {m[1]: dict(bytes=int(m[2]), packets=int(m[3]),
                                 drops=int(m[4]), backlog_bytes=int(m[5]),
                                 backlog_packets=int(m[6]))
                      for m in _CLASS.finditer("\n".join(classes) + "\n")}
        classes = []
        try:
            filters = json.loads(line)
        except ValueError:
            break
        p["pcp"] = {}
        for f in filters:
            opts = f.get("options", {})
            prio = opts.get("keys", {}).get("vlan_prio")
            if prio is not None and opts.get("actions"):
                st = opts["actions"][0]["stats"]
                p["pcp"][int(prio)] = dict(bytes=st["bytes"],
                                           packets=st["packets"])


def _delta(before, after):
    """after - before of a counter; a counter that went back was reset
    (a switch restore recreates its qdiscs): what it counted since."""
    if before is None or after is None:
        return None
    return after if after < before else after - before


def _rate(b0, p0, b1, p1, dt):
    db, dp = _delta(b0, b1), _delta(p0, p1)
    if db is None or dp is None:
        return dict(bps=None, pps=None)
    return dict(bps=round(db * 8 / dt, 1), pps=round(dp / dt, 1))


class Top:
    """Samples of a running lab's machines, and the rates between two."""

    def __init__(self, lab_name, topology, machines, names=(), timeout=30.0):
        """machines: {name: machine with run()}; names: only these
        (topology.host() names the known ones for an unknown name)."""
        self.lab_name = lab_name
        self.topology = topology
        self.hosts = [topology.host(n) for n in dict.fromkeys(names)] or \
            list(topology.hosts)
        self.machines = {h.name: machines[h.name] for h in self.hosts}
        self.scripts = {h.name: sample_script(h, topology.dcbx)
                        for h in self.hosts}
        self.timeout = timeout
        self._pool = concurrent.futures.ThreadPoolExecutor(len(self.hosts))

    def close(self):
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _read(self, host):
        # Stamped when asked: the script reads the counters first, a few
        # ms after it starts; the end of the round trip varies with the
        # DCBX queries after them.
        t = time.monotonic()
        try:
            res = self.machines[host.name].run(
                ["/bin/sh", "-c", self.scripts[host.name]], check=False,
                timeout=self.timeout)
        except DcblabError as e:
            return dict(t=t, error=str(e), ports={})
        return dict(t=t, error=None, ports=parse_sample(host, res.stdout))

    def sample(self):
        """{machine: {t, error, ports}}, all machines read at once. A
        machine that cannot be read has its error; if none can (the lab
        is down), LabError."""
        futures = {h.name: self._pool.submit(self._read, h)
                   for h in self.hosts}
        got = {name: f.result() for name, f in futures.items()}
        errors = [s["error"] for s in got.values() if s["error"]]
        if len(errors) == len(got):
            raise LabError(errors[0])
        return got

    def report(self, before, after, interval=None):
        """The rates between two samples: the JSON object `dcblab top -j`
        prints (schema in docs/lab.md, "dcblab top")."""
        machines = []
        for h in self.hosts:
            s0, s1 = before[h.name], after[h.name]
            dt = s1["t"] - s0["t"]
            error = s1["error"] or s0["error"]
            entry = dict(name=h.name, kind=h.kind,
                         seconds=round(dt, 3), error=error, ports=[])
            if not error:
                entry["ports"] = [self._port(h, nic, s0["ports"][nic.name],
                                             s1["ports"][nic.name], dt,
                                             after)
                                  for nic in h.nics]
            machines.append(entry)
        return dict(lab=self.lab_name, time=round(time.time(), 3),
                    interval=interval, dcbx=self.topology.dcbx,
                    machines=machines)

    def _port(self, host, nic, p0, p1, dt, after):
        st0, st1 = p0["stats"], p1["stats"]
        out = dict(dev=nic.name, peer=nic.peer or None)
        if host.is_switch:
            out["tx"] = self._bands(nic, p0, p1, dt)
            if nic.dcb:
                run, file = p1.get("dcb"), file_dcb(nic.dcb)
                out["dcb"] = dict(file=file, port=run,
                                  same=None if run is None else run == file)
        else:
            out["tx"] = self._queues(p0, p1, dt)
        out["rx"] = _rate(st0["rx_bytes"], st0["rx_packets"],
                          st1["rx_bytes"], st1["rx_packets"], dt)
        out["rx_pcp"] = None
        if host.is_switch and "pcp" in p0 and "pcp" in p1:
            out["rx_pcp"] = []
            for pcp, b in sorted(p1["pcp"].items()):
                a = p0["pcp"].get(pcp, {})
                out["rx_pcp"].append(dict(pcp=pcp, **_rate(
                    a.get("bytes"), a.get("packets"), b["bytes"],
                    b["packets"], dt)))
        out["drops"] = dict(tx=_delta(st0["tx_dropped"], st1["tx_dropped"]),
                            rx=_delta(st0["rx_dropped"], st1["rx_dropped"]))
        out["dcbx"] = self._dcbx(host, nic, p1, after) \
            if self.topology.dcbx else None
        return out

    @staticmethod
    def _queues(p0, p1, dt):
        """Per-queue deltas summed by the TC each queue has now."""
        q0, q1 = p0.get("queues", {}), p1.get("queues", {})
        tcs = p1.get("queue_tc", {})
        sums = {}
        for q, c1 in q1.items():
            c0 = q0.get(q, {})
            s = sums.setdefault(tcs.get(q, 0), [0, 0])
            s[0] += _delta(c0.get("bytes"), c1.get("bytes")) or 0
            s[1] += _delta(c0.get("packets"), c1.get("packets")) or 0
        return [dict(tc=tc, bps=round(b * 8 / dt, 1), pps=round(n / dt, 1))
                for tc, (b, n) in sorted(sums.items())]

    @staticmethod
    def _bands(nic, p0, p1, dt):
        """The ETS bands in TC order; a port without DCB (no ETS qdisc):
        its device counters as TC 0."""
        if not nic.dcb:
            st0, st1 = p0["stats"], p1["stats"]
            return [dict(tc=0, **_rate(st0["tx_bytes"], st0["tx_packets"],
                                       st1["tx_bytes"], st1["tx_packets"],
                                       dt))]
        b0, b1 = p0.get("bands", {}), p1.get("bands", {})
        out = []
        for band, tc in enumerate(port_bands(running_dcb(nic, p1)), 1):
            cls = f"{ETS_HANDLE}{band}"
            c0, c1 = b0.get(cls, {}), b1.get(cls, {})
            out.append(dict(
                tc=tc, band=cls,
                **_rate(c0.get("bytes"), c0.get("packets"), c1.get("bytes"),
                        c1.get("packets"), dt),
                drops=_delta(c0.get("drops"), c1.get("drops")),
                backlog_bytes=c1.get("backlog_bytes"),
                backlog_packets=c1.get("backlog_packets")))
        return sorted(out, key=lambda e: e["tc"])

    def _dcbx(self, host, nic, p, after):
        """willing (lldptool), and for a host NIC facing a switch port
        with a DCB: whether its driver holds the ETS the port runs (the
        file's if the switch was not read: "against")."""
        adopted, against = None, None
        if not host.is_switch and nic.peer_is_switch:
            sw, port = nic.peer.split(":")
            want = self.topology.host(sw).nic(port).dcb
            sample = after.get(sw, {}).get("ports", {}).get(port, {})
            if want:
                against = "port" if sample.get("dcb") else "file"
                want = running_dcb(self.topology.host(sw).nic(port), sample)
            ets = p.get("ets")
            if want and ets:
                adopted = (tuple(ets.get("prio_tc", ())),
                           tuple(ets.get("tc_tsa", ())),
                           tuple(ets.get("tc_bw", ()))) == \
                    (want.prio_tc, want.tsa, want.bw)
        return dict(willing=p.get("willing"), adopted=adopted,
                    against=against)
