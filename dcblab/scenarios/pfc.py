"""The fabric's lossless class (docs/pfc.md): priority 3 offered with the
lossy ones at more than the congested port takes, with sw's PFC agent
(pfcd) pausing the senders, and without PFC as the negative control.
Used by tests/test_pfc.py, ``dcblab demo`` and ``dcblab bench``.

What is counted where:
  - sent / received per flow: priosend's count against priosink's on h3;
  - sw's drops per band of the congested port (tc class counters), and
    the drops on the wire (the lab's taps: frames a guest's QEMU did not
    take);
  - the senders' own queues: a paused sender's frames wait in its qdisc,
    charged to its socket, so priosend blocks in send() (its send buffer
    is full) and is slowed, not dropped; qdisc drops and UDP
    SndbufErrors on the senders say whether anything died there;
  - pause frames at both ends: sw's ``requests`` per port, each host's
    ``indications`` (``dcb -s pfc show``), and pfcd's own counters and
    figures (/run/pfcd.json).
"""

import json
import statistics
import threading
import time
from dataclasses import dataclass, field

from ..lab.dcbx import LLDPTOOL
from ..lab.switch import ETS_HANDLE, pfc_thresholds, port_bands
from ..lab.wire import Wire
from ..testing.dcb import wait_for
from ..testing.traffic import Sink, send
from .fabric import PFCD_STATE, class_stats, congested_port, offer

__all__ = ["LosslessResult", "lossless", "pfc_counters", "pfcd_state",
           "set_switch_pfc", "switch_pfc", "band_of", "tap_drops",
           "sender_drops", "PFCD_STATE", "HolResult", "head_of_line",
           "StormResult", "pause_storm"]



def pfc_counters(guest, dev):
    """{"requests": [8], "indications": [8], "prio_pfc": [8 bools]} of a
    port (`dcb -j -s pfc show`)."""
    out = json.loads(guest.run(["dcb", "-j", "-s", "pfc", "show", "dev",
                                dev]).stdout)
    return {k: out[k] for k in ("requests", "indications", "prio_pfc")}


def pfcd_state(guest):
    """pfcd's counters and figures (its --state file), by port name."""
    d = json.loads(guest.run(["cat", PFCD_STATE]).stdout)
    return {**d, "ports": {p["name"]: p for p in d["ports"]}}


def band_of(dcb, pcp):
    """The congested port's class id (``10:N``) of the band holding pcp."""
    bands = port_bands(dcb)
    return f"{ETS_HANDLE}{bands.index(dcb.prio_tc[pcp]) + 1}"


def tap_drops(lab):
    """Frames the lab's taps dropped, total (a guest's QEMU did not take
    them: the only place the wire itself loses frames)."""
    out = json.loads(lab.wire.run(["ip", "-s", "-j", "link"]).stdout)
    taps = {Wire.tap(n) for h in lab.topology.hosts for n in h.nics}
    return sum(d["stats64"]["tx"]["dropped"] + d["stats64"]["rx"]["dropped"]
               for d in out if d["ifname"] in taps)


def sender_drops(guest, dev="eth0"):
    """Frames that died in a sending host itself rather than in the
    network: its qdiscs' drops on dev plus the TX drops of dev and its
    VLAN devices. (UDP's SndbufErrors is no measure: it also counts an
    ECONNREFUSED that meets a socket whose send buffer was once full.)"""
    out = guest.run(["tc", "-s", "-j", "qdisc", "show", "dev", dev]).stdout
    qdrops = sum(q.get("drops", 0) for q in json.loads(out)
                 if q.get("root"))
    links = json.loads(guest.run(["ip", "-s", "-j", "link"]).stdout)
    return qdrops + sum(d["stats64"]["tx"]["dropped"] for d in links
                        if d["ifname"] == dev
                        or d["ifname"].startswith(dev + "."))


def switch_pfc(lab, sw):
    """{port: priorities with PFC on} of a switch's ports, as its driver
    has them."""
    g = lab.guest(sw.name)
    return {p.name: [i for i, on in enumerate(
        pfc_counters(g, p.name)["prio_pfc"]) if on] for p in sw.nics}


def set_switch_pfc(lab, sw, prios):
    """PFC on exactly prios on every port of sw, the way its operator
    would: lldpad's configuration (lldptool), which lldpad gives the
    driver and advertises by DCBX; returns once every port's driver has
    it (lldpad applies it within a second)."""
    g = lab.guest(sw.name)
    enabled = ",".join(map(str, prios)) or "none"
    for p in sw.nics:
        g.run([LLDPTOOL, "-T", "-i", p.name, "-V", "PFC",
               f"enabled={enabled}"])
    wait_for(f"{sw.name}'s ports with PFC on {enabled}",
             lambda: switch_pfc(lab, sw),
             lambda m: all(v == list(prios) for v in m.values()), timeout=15)


@dataclass
class LosslessResult:
    load: float
    pfc: bool                      # sw's ports had PFC on the lossless pcp
    pcp: int                       # the lossless class's priority
    flows: list                    # fabric.Flow, with sent/received
    shares: dict                   # {pcp: share of the port, steady}
    expected: dict                 # {pcp: share the ETS configuration gives}
    band_drops: dict               # {pcp: drops at the congested port}
    tap_drops: int
    sink_drops: int
    sender_drops: dict             # {host: frames that died in it}
    requests: dict                 # {sw port: pause frames sent, for pcp}
    indications: dict              # {host: pause frames received, for pcp}
    peer: dict                     # {sw port: the host at its other end}
    thresholds: tuple              # (xoff, xon, headroom) of the port, bytes
    pfcd: dict = field(default_factory=dict)   # the congested port's
    seconds: float = 0.0           # the run, host clock

    def sent(self, pcp):
        return sum(f.sent for f in self.flows if f.pcp == pcp)

    def received(self, pcp):
        return sum(f.received for f in self.flows if f.pcp == pcp)

    def lost(self, pcp):
        return self.sent(pcp) - self.received(pcp)

    def as_json(self):
        return {"load": self.load, "pfc": self.pfc, "pcp": self.pcp,
                "flows": [vars(f) for f in self.flows],
                "shares": {str(p): s for p, s in self.shares.items()},
                "expected": {str(p): s for p, s in self.expected.items()},
                "band_drops": {str(p): n for p, n in self.band_drops.items()},
                "tap_drops": self.tap_drops, "sink_drops": self.sink_drops,
                "sender_drops": self.sender_drops,
                "requests": self.requests, "indications": self.indications,
                "peer": self.peer, "thresholds": list(self.thresholds),
                "pfcd": self.pfcd, "seconds": self.seconds}


def lossless(lab, *, load=1.2, pcp=3, lossy=(0, 2), frames=5000,
             pfc=True, seconds=8.0, senders=("h1", "h2")):
    """pcp and the lossy pcps offered from senders at once, each load x
    the congested port's line rate (fabric.offer), pcp's flows sending
    frames each; with pfc False, sw's ports have PFC off for the run (the
    negative control) and get the topology's PFC back after. The sink
    waits for what the lossless band still holds when the senders are
    done."""
    sw, port, rx = congested_port(lab.topology)
    g = lab.guest(sw.name)
    facing = {p.name: p.peer.split(":")[0] for p in sw.nics}
    pcps = (*lossy, pcp)

    def counters():
        c = {"sw": {p: pfc_counters(g, p) for p in facing}}
        for p, h in facing.items():
            c[h] = pfc_counters(lab.guest(h), "eth0")
        return c

    def drops():
        stats = class_stats(g, port.name)
        return {p: stats.get(band_of(port.dcb, p), {}).get("drops", 0)
                for p in pcps}
    if not pfc:
        set_switch_pfc(lab, sw, [])
    else:
        g.run(["dcblab-pfcd", "reset"])
    try:
        before, d0, t0 = counters(), drops(), tap_drops(lab)
        s0 = {h: sender_drops(lab.guest(h)) for h in senders}
        start = time.monotonic()
        r = offer(lab, pcps, load=load, seconds=seconds, senders=senders,
                  counts={pcp: frames}, drain=3.0)
        took = time.monotonic() - start
        after, d1, t1 = counters(), drops(), tap_drops(lab)
        s1 = {h: sender_drops(lab.guest(h)) for h in senders}
        state = pfcd_state(g)["ports"].get(port.name, {}) if pfc else {}
    finally:
        if not pfc:
            set_switch_pfc(lab, sw, port.dcb.pfc)
    return LosslessResult(
        load=load, pfc=pfc, pcp=pcp, flows=r.flows,
        shares={p: r.share(p) for p in r.got_bps}, expected=r.expected,
        band_drops={p: d1[p] - d0[p] for p in pcps},
        tap_drops=t1 - t0, sink_drops=r.sink_drops,
        sender_drops={h: s1[h] - s0[h] for h in senders},
        requests={p: after["sw"][p]["requests"][pcp]
                  - before["sw"][p]["requests"][pcp] for p in facing},
        indications={h: after[h]["indications"][pcp]
                     - before[h]["indications"][pcp]
                     for h in facing.values()},
        peer=facing, thresholds=pfc_thresholds(port),
        pfcd={k: state[k][pcp] for k in ("peak_backlog", "reaction_ms",
                                         "episodes") if k in state},
        seconds=took)


# --- PFC's costs ---------------------------------------------------------------

@dataclass
class HolResult:
    """Round trips at one priority between h1 and h2 (a path through sw
    that is not congested), alone and while sw pauses h1's and h2's
    priority for congestion at swp3: prioping's RTTs (ms) each time."""
    probes: int
    alone_ms: list
    congested_ms: list
    h1_paused: int                 # pause frames h1 received meanwhile

    @staticmethod
    def _median(v):
        return statistics.median(v) if v else float("nan")

    @property
    def slowdown(self):
        return self._median(self.congested_ms) / self._median(self.alone_ms)

    def as_json(self):
        return {**vars(self), "alone_median_ms": self._median(self.alone_ms),
                "congested_median_ms": self._median(self.congested_ms),
                "slowdown": self.slowdown}


def head_of_line(lab, *, probes=30, interval=0.1, load=1.2, pcp=3,
                 seconds=8.0, warmup=2.0):
    """Head-of-line blocking: prioping at pcp from h1 to h2 alone, then
    while pcp from h1 and h2 toward h3 (load x the port's line rate)
    makes sw pause h1's and h2's pcp: the probes wait in the paused
    class with the frames for h3, though their own path is idle."""
    dst = lab.topology.address("h2", vlan=100)

    def ping():
        res = lab.h1.run(["prioping", "-j", "-c", str(probes), "-i",
                          str(interval), "-P", str(pcp), "-W", "8", dst],
                         check=False, timeout=probes * interval + 60)
        return [p["rtt_ms"] for p in json.loads(res.stdout)["probes"]]
    alone = ping()
    ind0 = pfc_counters(lab.h1, "eth0")["indications"][pcp]
    got = {}

    def load_it():
        got["r"] = offer(lab, (pcp,), load=load, seconds=seconds)
    t = threading.Thread(target=load_it)
    t.start()
    try:
        time.sleep(warmup)
        congested = ping()
    finally:
        t.join()
    ind1 = pfc_counters(lab.h1, "eth0")["indications"][pcp]
    return HolResult(probes, alone, congested, ind1 - ind0)


@dataclass
class StormResult:
    """A pause storm: h3 sends XOFF for pcp to sw:swp3 every 20 ms for
    seconds while h1 sends pcp and priority 0 to h3."""
    seconds: float
    storms: int                    # pfcd: swp3's band declared stormed
    log: list                      # pfcd's lines about it
    swp3_indications: int          # the storm's frames sw received
    h1_xoff: int                   # pause frames sw sent h1 meanwhile
    lossy_sent: int
    lossy_received: int            # priority 0 from h1, through the storm
    band_drops: int                # pcp's band at swp3, dropped
    after_sent: int
    after_received: int            # pcp from h1 once the storm is over

    def as_json(self):
        return vars(self)


def pause_storm(lab, *, seconds=4.0, pcp=3, lossy=0, rate=300):
    """h3 (a broken NIC) pauses sw:swp3's pcp continuously for seconds;
    h1 sends pcp and lossy to h3 at rate frames/s each. sw honours the
    pauses, and swp3's root qdisc (tbf, ets under it) waits behind the
    paused class, lossy included; pfcd's watchdog finds the band stalled,
    stops pausing h1 for it, stops honouring h3's pauses and drops what
    arrives for pcp, and restores once the storm is over: lossy frames
    arrive, late; pcp frames sent after the storm arrive."""
    sw, port, rx = congested_port(lab.topology)
    g = lab.guest(sw.name)
    dst = lab.topology.address(rx, vlan=100)
    n = int(seconds / 0.02)
    log0 = len(g.read("/run/pfcd.log").splitlines())
    cid = band_of(port.dcb, pcp)
    drops0 = class_stats(g, port.name)[cid]["drops"]
    storms0 = pfcd_state(g)["ports"][port.name]["storms"][pcp]
    ind0 = pfc_counters(g, port.name)["indications"][pcp]
    req0 = pfc_counters(g, "swp1")["requests"][pcp]
    sink = Sink(lab.guest(rx), "eth0", timeout=3 * seconds + 40,
                idle=seconds + 4.0)
    storm = lab.guest(rx).spawn(["pfcsend", "-j", "-I", "eth0", "-p",
                                 str(pcp), "-c", str(n), "-i", "0.02"])
    count = int(rate * seconds)
    flows = [send(lab.h1, dst, spawn=True, rate=rate, count=count,
                  flow=f, so_priority=p)
             for f, p in ((901, lossy), (902, pcp))]
    lab.guest(rx).wait(storm, timeout=3 * seconds + 30)
    for f in flows:
        lab.h1.wait(f, timeout=3 * seconds + 60)
    # once the watchdog restored (200 ms without pauses) and the band
    # drained, frames of pcp go through again
    time.sleep(1.0)
    after = send(lab.h1, dst, rate=rate, count=50, flow=903,
                 so_priority=pcp)
    got = {f["flow"]: f["received"] for f in sink.result()["flows"]}
    lines = g.read("/run/pfcd.log").splitlines()[log0:]
    return StormResult(
        seconds=seconds,
        storms=pfcd_state(g)["ports"][port.name]["storms"][pcp] - storms0,
        log=[ln for ln in lines if port.name in ln and
             ("stormed" in ln or "restored" in ln)],
        swp3_indications=pfc_counters(g, port.name)["indications"][pcp]
        - ind0,
        h1_xoff=pfc_counters(g, "swp1")["requests"][pcp] - req0,
        lossy_sent=count, lossy_received=got.get(901, 0),
        band_drops=class_stats(g, port.name)[cid]["drops"] - drops0,
        after_sent=after["sent"], after_received=got.get(903, 0))
