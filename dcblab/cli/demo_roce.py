"""`dcblab demo roce`: RoCEv2 over soft-RoCE through the fabric
(docs/roce.md). The lab up; the rxe devices, the APP entries (DSCP, UDP
port 4791) the hosts learnt from sw by DCBX and the nftables rules
dcbapp-netprio made of them; one RDMA write stream alone and where its
packets went; two streams on VLAN 100 while bulk traffic overloads the
congested port, with PFC and without (the RoCE band then a lossy
class's buffer), side by side; ib_send_lat at the strict class against
best effort under the same load; down. Exit 1 when the stream alone
was not carried by its class, the PFC run lost RoCE or got under 70% of
its share, the run without PFC dropped none or kept half of PFC's
goodput, or the strict class was not faster."""

import json
import time

from ..core import paths
from ..core.errors import UsageError
from ..lab import Lab
from ..scenarios.fabric import congested_port, expected_shares
from ..scenarios.roce import (ERROR_COUNTERS, RXE, lossy_band_packets,
                              port_apps, roce_apps, send_latency,
                              write_streams)
from ..topology import load
from .common import say
from .demo import lab_splats, lab_up, print_table, verdict

__all__ = ["demo_roce", "check_roce_topology", "FABRIC"]

FABRIC = paths.ROOT / "topology" / "dcb-fabric.toml"
LOAD = 1.2
# the streams under load: tagged, so that sw classifies every RoCEv2
# packet by its PCP (those without the QP's DSCP too)
VLAN = 100
SECONDS = 10.0


def check_roce_topology(topo):
    """A one-line UsageError unless topo has what the demo needs: a
    shaped switch port with APP DSCP entries, and rdma on the NICs of
    the hosts that send and receive."""
    try:
        sw, port, rx = congested_port(topo)
    except ValueError as e:
        raise UsageError(f"demo roce: {e}") from None
    if not port.dcb or not roce_apps(topo, 3):
        raise UsageError(f"demo roce: {topo.path}: {sw.name}:{port.name} "
                         "has no APP DSCP entry for priority 3")
    hosts = [h for h in topo.hosts if not h.is_switch]
    missing = [h.name for h in hosts if not any(n.rdma for n in h.nics)]
    if missing:
        raise UsageError(f"demo roce: {topo.path}: no NIC with `rdma = "
                         f"true` on {', '.join(missing)}")


def _devices(lab):
    for h in (h.name for h in lab.topology.hosts if not h.is_switch):
        link = json.loads(lab.guest(h).run(["rdma", "-j", "link",
                                            "show"]).stdout)
        say("  " + h + ": " + ", ".join(
            f"{lk['ifname']} on {lk['netdev']} ({lk['state']})"
            for lk in link))


def _streams_table(on, off):
    cells = [("", "PFC on", "PFC off")]
    cells.append(("goodput, Mbit/s", f"{on.goodput_mbit_s:.2f}",
                  f"{off.goodput_mbit_s:.2f}"))
    cells.append(("RoCE band at the port, Mbit/s",
                  f"{on.throughput_mbit_s:.2f}",
                  f"{off.throughput_mbit_s:.2f}"))
    for k in ERROR_COUNTERS:
        cells.append((f"rxe {k}", str(on.errors[k]), str(off.errors[k])))
    cells.append(("RoCE band drops", str(on.band_drops),
                  str(off.band_drops)))
    cells.append(("pause frames to h1 + h2",
                  str(sum(on.indications.values())),
                  str(sum(off.indications.values()))))
    cells.append(("streams through the window",
                  str(sum(s.through_window for s in on.streams)),
                  str(sum(s.through_window for s in off.streams))))
    print_table(cells)


def demo_roce(topology=None, name="demo-roce"):
    topo = load(topology or FABRIC)
    check_roce_topology(topo)
    sw, port, rx = congested_port(topo)
    share = expected_shares(port.dcb, (0, 2, 3))[3]
    the_lab = Lab(topo, name)
    say(f"dcblab demo roce: RoCEv2 over soft-RoCE: lab {name} "
        f"({topo.path}) ...")
    t0 = time.monotonic()
    wrong = []
    try:
        timings, lab = lab_up(the_lab)
        say(f"\nlab {name} up in {timings['total']:.2f}s; soft-RoCE "
            "devices (topology key rdma):")
        _devices(lab)
        apps = " ".join(f"{d}:{p}" for d, p in roce_apps(topo))
        ports = " ".join(f"{n}:{p}" for n, p in port_apps(topo))
        say(f"\n{sw.name} advertises APP DSCP {apps} and UDP port {ports} "
            "by DCBX; h1 took them (dcb app show dev eth0):")
        for line in lab.h1.run(["dcb", "app", "show", "dev",
                                "eth0"]).stdout.splitlines():
            say(f"  {line}")
        say("dcbapp-netprio turns them into nftables rules (rxe sends "
            "from kernel sockets: no cgroup reaches it; the port rule "
            "also catches the RoCEv2 packets without the QP's DSCP: "
            "rdma_cm's, perftest's exchange); sw's ports trust DSCP, then "
            "PCP, on ingress")

        say(f"\none RDMA write stream h1 -> {rx} ({RXE}, ib_write_bw, "
            f"64 KiB writes), nothing else on the fabric, "
            f"{SECONDS:.0f} s window ...")
        a = write_streams(lab, senders=("h1",), seconds=SECONDS)
        run = a.run
        sent = run["sent"]["h1"]
        say(f"  goodput {a.goodput_mbit_s:.2f} Mbit/s in the window "
            f"({port.name} is shaped to {port.rate}); over the whole run "
            f"rxe sent {sent} packets, {sw.name}:swp1's DSCP filter gave "
            f"{run['trusted']['swp1']} priority 3 (the "
            f"{sent - run['trusted']['swp1']} others: ToS 0), "
            f"{port.name}'s band of TC {port.dcb.prio_tc[3]} sent "
            f"{run['band_packets']}, dropped {run['band_drops']}; rxe "
            f"errors {a.error_total}")
        if run["band_drops"] or not run["band_packets"]:
            wrong.append("the stream alone was not carried by its band "
                         "without drops")

        say(f"\nRDMA writes from h1 and h2 to {rx} on VLAN {VLAN} (PCP 3) "
            f"while PCP 0 and 2 from both offer {LOAD} x {port.rate} each; "
            "with PFC on priority 3, then with PFC off on sw's ports and "
            f"the RoCE band a lossy class's buffer "
            f"({lossy_band_packets(port)} packets) ...")
        on = write_streams(lab, seconds=SECONDS, vlan=VLAN, load=LOAD)
        off = write_streams(lab, seconds=SECONDS, vlan=VLAN, load=LOAD,
                            pfc=False)
        _streams_table(on, off)
        want = share * port.rate_bps / 1e6
        say(f"  the RoCE band's ETS share: {share:.0%} of {port.rate} = "
            f"{want:.1f} Mbit/s")
        if on.band_drops or on.error_total or \
                on.goodput_mbit_s < 0.7 * want:
            wrong.append("with PFC the RoCE streams lost packets or got "
                         "less than 70% of their share")
        if not off.band_drops or off.goodput_mbit_s >= \
                0.5 * on.goodput_mbit_s:
            wrong.append("without PFC the RoCE band dropped nothing or "
                         "the goodput did not fall below half of PFC's")
        say("\nib_send_lat h1 -> h3 under the same load: DSCP 46 (priority "
            "5, strict), and DSCP 0 without dcbapp-netprio (best "
            "effort) ...")
        strict = send_latency(lab, prio=5, load=LOAD)
        be = send_latency(lab, prio=0, load=LOAD)
        cells = [("class", "round trips", "average latency", "rxe errors")]
        for what, r in (("strict (DSCP 46)", strict),
                        ("best effort (DSCP 0)", be)):
            cells.append((what, str(r.iterations),
                          f"{r.t_avg_us / 1000:.2f} ms" if r.iterations
                          else "none completed",
                          str(sum(r.errors.values()))))
        print_table(cells)
        if not strict.iterations or (be.iterations and
                                     be.t_avg_us <= strict.t_avg_us):
            wrong.append("the strict class was not faster than best effort")
        splats = lab_splats(the_lab)
    finally:
        the_lab.down()
    say(f"\ndcblab demo roce: lab {name} down "
        f"({time.monotonic() - t0:.1f}s in all)")
    return verdict("dcblab demo roce", splats, wrong)
