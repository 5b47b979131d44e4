"""DCBX between the two guests, and the APP chain it drives: used by the
test suite (tests/test_dcbx.py), ``dcblab demo dcbx`` and ``dcblab
bench``, so all three show the same measurement.

``negotiate()``: h2, unwilling, recommends an ETS configuration, PFC bits
and an APP entry; h1, willing, takes them. What h1's *driver* holds
(``dcb -j``) before and after, and how long it took.

``app_chain()``: h2 advertises APP "UDP port 4791 -> priority 5"; on h1
dcbapp-netprio turns the entry into the net_prio cgroup cgdcbx-3-4791; an
unmodified sender started in that cgroup sends to h2:4791 over the VLAN
device; h2 counts each arriving frame's PCP (tc flower counters, UDP to
4791 only). Then h2
changes the priority to 3 and withdraws the entry while a steady stream
runs; each phase records the map on h1, the PCPs that arrived once it
settled, and the time from the change on h2 to the first frame with the
new PCP.

Times are measured from the host: from just before the lldptool command
on h2 to the poll that saw the result, so they include one lldptool run
(~0.1-0.2 s under TCG) and up to one poll (``POLL_S`` plus a guest
command, ~0.05-0.1 s) of resolution. Both scenarios expect lldpad
running with fresh state in both guests and driver defaults (as a lab
with ``dcbx = true`` comes up; tests use ``fresh_lldpad``).
"""

import json
import time
from dataclasses import dataclass

from ..lab import DCBAPP_LOG, start_dcbapp, stop_dcbapp
from ..testing.dcb import (SEL, apps_of, dcbx_port, ets_of, lldp_del_app,
                           lldp_set, pfc_of, wait_for)
from ..testing.traffic import (Sink, flow_of, pcp_counts, pcp_filters,
                               pcp_packets)

__all__ = ["REC", "REC_PFC", "ROCE_PORT", "CHAIN_CGROUP", "DcbState",
           "Negotiation", "ChainPhase", "ChainResult", "dcb_state",
           "negotiate", "app_chain", "chain_ifpriomap"]

# What h2 recommends in negotiate(): 4 classes, 2 priorities each, two
# ETS classes sharing 70/30, two strict.
REC = dict(prio_tc=(0, 0, 1, 1, 2, 2, 3, 3),
           tsa=("ets", "ets") + ("strict",) * 6, bw=(70, 30, 0, 0, 0, 0, 0, 0))
REC_PFC = [3, 4]
ROCE_PORT = 4791                  # RoCEv2's UDP port
APP_SEL = SEL["dgram-port"]       # 3: UDP
CHAIN_CGROUP = f"/sys/fs/cgroup/net_prio/cgdcbx-{APP_SEL}-{ROCE_PORT}"
POLL_S = 0.05
STREAM_PPS = 500                  # the steady stream of app_chain()
SETTLE_S = 0.5                    # after the first new-PCP frame, before
WINDOW_S = 1.5                    # a window whose PCPs are counted


@dataclass(frozen=True)
class DcbState:
    """A driver's DCB as ``dcb -j`` shows it."""
    ets: dict                     # {prio_tc, tsa, bw}: tuples of 8
    pfc: list                     # priorities with PFC on
    apps: list                    # UDP APP entries: (port, prio)


@dataclass(frozen=True)
class Negotiation:
    before: DcbState              # h1's driver before h2 spoke
    after: DcbState               # h1's driver once it matched h2
    h2: DcbState                  # h2's own driver (unwilling: its ETS-CFG)
    seconds: float                # h2's lldptool -> h1's driver shows REC
    seconds_all: float            # ... and PFC and APP too


@dataclass(frozen=True)
class ChainPhase:
    what: str                     # the change on h2, e.g. "app=5,3,4791"
    prio: int                     # the priority it should give (0: none)
    ifpriomap: dict               # the cgroup's map on h1 ({} when gone)
    pcp: dict                     # {pcp: frames} on h2 in the window (or
                                  # of the burst, in the first phase)
    seconds: float                # change on h2 -> first frame with prio


@dataclass(frozen=True)
class ChainResult:
    burst_sent: int               # the first phase's burst, all at prio 5
    phases: list                  # ChainPhase: advertise, change, withdraw
    cgroup_removed: float         # seconds from the sender's exit to the
                                  # daemon removing the empty cgroup
    log: str                      # dcbapp-netprio's log of the run


def dcb_state(guest, dev="eth0"):
    return DcbState(ets_of(guest, dev), pfc_of(guest, dev),
                    apps_of(guest, dev))


def negotiate(lab, rec=REC, pfc=REC_PFC, app_prio=5):
    """h1 willing, h2 unwilling recommending rec, pfc and APP
    (app_prio, UDP, ROCE_PORT): h1's driver before and after."""
    before = dcb_state(lab.h1)
    dcbx_port(lab.h1, willing=True)
    t0 = time.monotonic()
    dcbx_port(lab.h2, willing=False, rec=rec, pfc=pfc)
    lldp_set(lab.h2, "APP", f"app={app_prio},{APP_SEL},{ROCE_PORT}")
    rec = {k: tuple(v) for k, v in rec.items()}
    wait_for("h1's driver ETS == h2's ETS-REC", lambda: ets_of(lab.h1),
             lambda e: e == rec, interval=POLL_S)
    seconds = time.monotonic() - t0
    want = DcbState(rec, sorted(pfc), [(ROCE_PORT, app_prio)])
    after, _ = wait_for("h1's driver ETS, PFC and APP == h2's",
                        lambda: dcb_state(lab.h1), lambda s: s == want,
                        interval=POLL_S)
    return Negotiation(before, after, dcb_state(lab.h2), seconds,
                       time.monotonic() - t0)


def chain_ifpriomap(guest):
    """The APP chain cgroup's ifpriomap as {dev: prio} ({} if none)."""
    res = guest.run(["cat", f"{CHAIN_CGROUP}/net_prio.ifpriomap"],
                    check=False)
    if res.rc:
        return {}
    return {d: int(p) for d, p in (line.split()
                                   for line in res.stdout.splitlines())}


def _sender(dst, **opts):
    """priosend started in the chain's cgroup by a shell, as an operator
    would (echo $$ > cgroup.procs; exec): the program sets no priority
    and knows no cgroup."""
    argv = ["priosend", "-j", "--port", str(ROCE_PORT)]
    for key, value in opts.items():
        argv += ["--" + key, str(value)]
    return ["sh", "-c", f"echo $$ > {CHAIN_CGROUP}/cgroup.procs && exec "
            + " ".join(argv + [dst])]


def _since(lab, before):
    now = pcp_packets(lab.h2, "eth0")
    return {p: n - before.get(p, 0) for p, n in now.items()
            if n - before.get(p, 0)}


def _window(lab):
    time.sleep(SETTLE_S)
    before = pcp_packets(lab.h2, "eth0")
    time.sleep(WINDOW_S)
    return _since(lab, before)


def _change(lab, what, prio, change):
    """Run change() on h2; the phase once frames arrive with prio."""
    before = pcp_packets(lab.h2, "eth0")
    t0 = time.monotonic()
    change()
    wait_for(f"frames with PCP {prio} on h2 after {what}",
             lambda: _since(lab, before), lambda d: d.get(prio, 0) > 0,
             interval=POLL_S)
    seconds = time.monotonic() - t0
    return ChainPhase(what, prio, chain_ifpriomap(lab.h1), _window(lab), seconds)


def app_chain(lab, *, burst=5000, vlan=100):
    """The whole chain (module docstring); dcbapp-netprio runs on h1 for
    the length of it and is stopped on every path."""
    h1, h2 = lab.h1, lab.h2
    dcbx_port(h1, willing=True)
    dcbx_port(h2, willing=False)
    start_dcbapp(h1.machine, "--dev", "eth0")
    stream = None
    try:
        # The chain's frames only: h1's ARP probes on eth0.100 (its
        # neighbour entry for h2 goes stale under one-way traffic) leave
        # at priority 0 whatever the cgroup, and were seen as a stray
        # PCP 0 frame in a window.
        pcp_filters(h2, "eth0", vlan, udp_port=ROCE_PORT)
        dst = lab.topology.address("h2", vlan, "ipv4")
        h1.run(["ping", "-c", "1", "-W", "2", dst])
        app = f"app=5,{APP_SEL},{ROCE_PORT}"
        t0 = time.monotonic()
        lldp_set(h2, "APP", app)
        wait_for(f"dcbapp-netprio maps {CHAIN_CGROUP} to 5 on eth0 and "
                 f"eth0.{vlan}", lambda: chain_ifpriomap(h1),
                 lambda m: m.get("eth0") == 5 and m.get(f"eth0.{vlan}") == 5,
                 interval=POLL_S)
        mapped = time.monotonic() - t0
        sink = Sink(h2, "eth0", count=burst, timeout=90, idle=3,
                    extra=("-p", str(ROCE_PORT)))
        sent = json.loads(h1.run(_sender(dst, count=burst, flow=1),
                                 timeout=120).stdout)["sent"]
        phases = [ChainPhase(app, 5, chain_ifpriomap(h1),
                             pcp_counts(flow_of(sink.result(), 1)), mapped)]

        stream = h1.spawn(_sender(dst, count=STREAM_PPS * 120,
                                  rate=STREAM_PPS, flow=2))
        wait_for("the stream arrives with PCP 5", lambda: _since(lab, {}),
                 lambda d: d.get(5, 0) > sent, interval=POLL_S)
        # The new priority is added before the old one is withdrawn, so
        # h1's table never lacks the entry; with both the daemon takes
        # the highest, still 5, until 5 goes.
        lldp_set(h2, "APP", f"app=3,{APP_SEL},{ROCE_PORT}")
        phases.append(_change(
            lab, f"app=5 -> 3,{APP_SEL},{ROCE_PORT}", 3,
            lambda: lldp_del_app(h2, 5, APP_SEL, ROCE_PORT)))
        phases.append(_change(
            lab, f"app=3,{APP_SEL},{ROCE_PORT} withdrawn", 0,
            lambda: lldp_del_app(h2, 3, APP_SEL, ROCE_PORT)))
        h1.run(["kill", str(stream.pid)], check=False)
        h1.wait(stream, check=False)
        stream = None
        t0 = time.monotonic()
        wait_for(f"dcbapp-netprio removes the empty {CHAIN_CGROUP}",
                 lambda: chain_ifpriomap(h1), lambda m: not m, timeout=5,
                 interval=POLL_S)
        removed = time.monotonic() - t0
        return ChainResult(sent, phases, removed,
                           h1.read(DCBAPP_LOG))
    finally:
        if stream is not None:
            h1.run(["kill", str(stream.pid)], check=False)
            h1.wait(stream, check=False)
        stop_dcbapp(h1.machine)
