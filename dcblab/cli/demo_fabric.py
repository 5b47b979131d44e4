"""`dcblab demo` (`make demo`): the DCB priority demonstration on
topology/dcb-fabric.toml. The fabric up; the switch port's DCB
configuration as the file gives it and as each host adopted it by DCBX;
the three ETS classes loaded from h1 and h2 at once, with a live table of
sw's congested port (per-band rate and drops, read every second by the
host's clock); the shares measured at h3 against the configured ones;
build/demo/shares.png and shares.json; PFC: the lossless priority's
drops at sw (0) beside the lossy ones', and the pause frames sw sent and
each host received (docs/pfc.md); down. Exit 1 when a share is off by
more than SHARE_TOLERANCE, a frame arrived with a wrong PCP, the
lossless priority dropped a frame at sw, or a kernel splat appeared."""

import json
import threading
import time

from ..core import paths
from ..lab import Lab
from ..lab.switch import port_bands
from ..scenarios.fabric import congested_port, offer, parse_class_stats
from ..scenarios.pfc import pfc_counters
from ..testing.dcb import apps_of, ets_of, pfc_of, wait_for
from ..topology import load
from .common import say
from .demo import lab_splats, lab_up, print_table, verdict

__all__ = ["demo_fabric", "FABRIC", "SHARE_TOLERANCE"]

FABRIC = paths.ROOT / "topology" / "dcb-fabric.toml"
SHARE_TOLERANCE = 0.05
PCPS = (0, 2, 3)
LOAD = 1.2


def _port_lines(port):
    d = port.dcb
    cells = [("TC", "priorities", "TSA", "bandwidth")]
    for tc in range(d.tcs):
        cells.append((str(tc), ",".join(map(str, d.prios_of(tc))), d.tsa[tc],
                      f"{d.bw[tc]} %" if d.tsa[tc] == "ets" else "-"))
    print_table(cells)
    say(f"  PFC on priorities {','.join(map(str, d.pfc)) or 'none'}; APP "
        + (", ".join(f"{a.selector} {a.protocol} -> priority {a.priority}"
                     for a in d.apps) or "none"))


def _adopted(lab, port):
    d = port.dcb
    want = (dict(prio_tc=d.prio_tc, tsa=d.tsa, bw=d.bw), list(d.pfc),
            sorted((a.protocol, a.priority) for a in d.apps))
    for host in ("h1", "h2", "h3"):
        g = lab.guest(host)
        got, secs = wait_for(f"{host} to adopt the switch's DCB",
                             lambda: (ets_of(g), pfc_of(g), apps_of(g)),
                             lambda v: v == want, timeout=15)
        ets, pfc, apps = got
        say(f"  {host}: prio-tc {''.join(map(str, ets['prio_tc']))}, bw "
            f"{'/'.join(map(str, ets['bw'][:d.tcs]))}, PFC "
            f"{','.join(map(str, pfc)) or 'off'}, APP "
            f"{', '.join(f'udp {p}->{q}' for p, q in apps) or 'none'}"
            f" (dcb show dev eth0; as the file: yes)")


def _paused_share(r):
    """{switch port: mean fraction of the steady interval it kept its
    partner paused} from the result's pause series."""
    out = {}
    lo, hi = r.steady
    for port, series in (r.pause or {}).get("ports", {}).items():
        inside = [f for t, f in series if lo <= t <= hi]
        if inside:
            out[port] = sum(inside) / len(inside)
    return out


class _LiveBands(threading.Thread):
    """Every second, sw's congested port's bands: rate and drops since
    the last read, one line each, until stopped. Rates by the switch's
    own clock (its uptime, read in the same command as the counters)."""

    def __init__(self, lab, sw, port):
        super().__init__(daemon=True)
        self.g, self.port = lab.guest(sw.name), port
        self.band_of = {tc: i for i, tc in enumerate(port_bands(port.dcb))}
        self.done = threading.Event()

    def read(self):
        out = self.g.run(["/bin/sh", "-c", "cat /proc/uptime; /sbin/tc -s "
                          f"class show dev {self.port.name}"]).stdout
        return float(out.split()[0]), parse_class_stats(out)

    def run(self):
        t0, last = None, None
        while not self.done.wait(1.0):
            now, stats = self.read()
            if last:
                t_last, prev = last
                cols = []
                for tc, i in sorted(self.band_of.items()):
                    cid = f"10:{i + 1}"
                    if cid not in stats or cid not in prev:
                        cols.append(f"TC{tc}   (not read)")
                        continue
                    db = stats[cid]["bytes"] - prev[cid]["bytes"]
                    dd = stats[cid]["drops"] - prev[cid]["drops"]
                    cols.append(f"TC{tc} {db * 8 / (now - t_last) / 1e6:5.2f}"
                                f" Mbit/s {dd:4d} drops")
                say(f"  {now - t0:4.1f} s  " + " | ".join(cols))
            else:
                t0 = now
            last = (now, stats)


def demo_fabric(topology=None, name="demo-fabric"):
    topo = load(topology or FABRIC)
    sw, port, rx = congested_port(topo)
    the_lab = Lab(topo, name)
    out = paths.build_dir() / "demo"
    say(f"dcblab demo: DCB priorities on a switch: lab {name} "
        f"({topo.path}) ...")
    t0 = time.monotonic()
    wrong = []
    try:
        timings, lab = lab_up(the_lab)
        hosts = [h.name for h in topo.hosts if not h.is_switch]
        say(f"\nlab {name} up in {timings['total']:.2f}s: hosts "
            f"{', '.join(hosts)}; switch {sw.name} (ports "
            f"{', '.join(p.name for p in sw.nics)} in a VLAN-aware bridge, "
            "PCP trusted on ingress)")
        say(f"\n{sw.name}:{port.name} toward {rx}: shaped to {port.rate} "
            f"(tbf), and its DCB configuration from the file, enforced by "
            f"`ets` under the shaper and advertised by lldpad (unwilling):")
        _port_lines(port)
        say("\nthe hosts adopted it by DCBX (their lldpad is willing):")
        _adopted(lab, port)

        say(f"\nETS: PCP {', '.join(map(str, PCPS))} each offered "
            f"{LOAD} x {port.rate} from h1 and h2 at once; "
            f"{sw.name}:{port.name}'s bands, live (host clock):")
        live = _LiveBands(lab, sw, port)
        facing = {p.name: p.peer.split(":")[0] for p in sw.nics}

        def pauses():
            return ({p: pfc_counters(lab.guest(sw.name), p)["requests"]
                     for p in facing},
                    {h: pfc_counters(lab.guest(h), "eth0")["indications"]
                     for h in facing.values()})
        before = pauses()
        live.start()
        try:
            r = offer(lab, PCPS, load=LOAD)
        finally:
            live.done.set()
            live.join()
        after = pauses()
        cells = [("PCP", "TC", "configured", f"measured at {rx}", "Mbit/s",
                  f"dropped at {sw.name}")]
        band_of = {tc: i for i, tc in enumerate(port_bands(port.dcb))}
        for p in PCPS:
            tc = port.dcb.prio_tc[p]
            drops = r.qdisc.get(f"10:{band_of[tc] + 1}", {}).get("drops", 0)
            cells.append((str(p), str(tc), f"{r.expected[p]:.1%}",
                          f"{r.share(p):.1%}", f"{r.got_bps[p] / 1e6:.2f}",
                          str(drops)))
            if abs(r.share(p) - r.expected[p]) > SHARE_TOLERANCE:
                wrong.append(f"PCP {p}: {r.share(p):.1%}, configured "
                             f"{r.expected[p]:.1%}")
        say(f"\nshares over the steady {r.steady[0]:.0f}-{r.steady[1]:.1f} s"
            f" (priosink on {rx}); the port carried "
            f"{r.wire_bps / 1e6:.2f} Mbit/s on the wire:")
        print_table(cells)
        if r.wrong_pcp:
            wrong.append(f"{r.wrong_pcp} frames arrived with another PCP")
        say(f"  frames with a PCP other than the one sent: {r.wrong_pcp}")
        for p in port.dcb.pfc:
            tc = port.dcb.prio_tc[p]
            drops = r.qdisc.get(f"10:{band_of[tc] + 1}", {}).get("drops", 0)
            sent = {q: after[0][q][p] - before[0][q][p] for q in facing}
            got = {h: after[1][h][p] - before[1][h][p]
                   for h in facing.values()}
            say(f"\nPFC on priority {p} (lossless): {drops} dropped at "
                f"{sw.name} while the others dropped; pause frames "
                + ", ".join(f"{sw.name}:{q} sent {sent[q]}, {facing[q]} "
                            f"received {got[facing[q]]}" for q in facing)
                + f" (dcb -s pfc show; pfcd's log: {sw.name}:/run/pfcd.log)")
            paused = _paused_share(r)
            if paused:
                say("  time paused over the steady interval (the PNG's "
                    "last panel): " + ", ".join(
                        f"{facing.get(q, q)} {f:.0%}"
                        for q, f in sorted(paused.items())))
            if drops:
                wrong.append(f"PCP {p} is lossless but {drops} frames "
                             f"dropped at {sw.name}")
        out.mkdir(parents=True, exist_ok=True)
        (out / "shares.json").write_text(json.dumps(r.as_json()))
        try:
            from ..scenarios.plot import plot_result
            plot_result(r.as_json(), out / "shares.png")
            say(f"\nwrote {out / 'shares.png'} and shares.json "
                f"(`dcblab plot {out / 'shares.json'} -o X.png` redraws it)")
        except Exception as e:  # the demo's numbers stand without the PNG
            say(f"\nno plot: {e}")
            wrong.append(f"plot: {e}")
        splats = lab_splats(the_lab)
    finally:
        the_lab.down()
    say(f"\ndcblab demo: lab {name} down ({time.monotonic() - t0:.1f}s in "
        "all)")
    return verdict("dcblab demo", splats, wrong)
