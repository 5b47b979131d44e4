"""`dcblab demo` is the fabric demonstration (demo_fabric.py); `dcblab
demo roce` RoCEv2 through it (demo_roce.py). `dcblab
demo netprio`: the two-VM lab up, what it holds, a ping across, the
two-cgroup scenario live, down. `dcblab demo dcbx`: the lab up with lldpad,
DCBX negotiation (h1's driver before and after) and the APP chain
(APP entry -> cgroup -> ifpriomap -> PCP on h2) live, down."""

import os
import re
import tempfile
import time

from ..core import paths
from ..core.errors import UsageError
from ..lab import Lab
from ..scenarios import (DEFAULT_PRIOS, REC_PFC, ROCE_PORT, app_chain,
                         negotiate, two_cgroups_at_once)
from ..testing import LabHandle
from ..testing.dcb import fresh_lldpad
from ..topology import load
from .common import need_images, say, sigterm_as_exit

__all__ = ["add_parsers", "demo", "lab_splats", "verdict", "print_table",
           "lab_up"]

PER_FLOW = 50_000
VLAN = 100
# Loss the demo tolerates (explained, exit 0) before it fails: a lab under
# TCG on a busy host may lose a few frames, and the explanation says where;
# more than this is a lab that does not keep up, not a detail.
LOSS_BOUND = 0.01


def _fmt(counts):
    return ", ".join(f"{k}:{v}" for k, v in sorted(counts.items(),
                                                    key=lambda kv: str(kv[0])))


def print_table(cells):
    """Rows of strings, the first the header, in left-aligned columns."""
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    for c in cells:
        say("  " + "  ".join(x.ljust(w) for x, w in zip(c, widths)).rstrip())


def _table(result):
    head = ("cgroup", "net_prio map", f"TC on {result.sender}",
            "PCP on wire", f"PCP:count on {result.receiver}", "lost",
            "misclassified")
    cells = [head]
    for f in result.flows:
        cells.append((f.cgroup.rsplit("/", 1)[-1], f.map,
                      f"TC{f.prio}: {result.tc_tx.get(f.prio, 0)}",
                      _fmt(f.wire_pcp) or "-", _fmt(f.pcp_rx) or "-",
                      str(f.lost), str(f.misclassified)))
    print_table(cells)


def _controllers(guest):
    out = []
    for line in guest.read("/proc/cgroups").splitlines()[1:]:
        name, hier, _, enabled = line.split()
        state = f"v1 hierarchy {hier}" if int(hier) else "not mounted"
        out.append(f"{name} ({state}, "
                   f"{'enabled' if enabled == '1' else 'disabled'})")
    return ", ".join(out)


def _ping(guest, dst):
    res = guest.run(["ping", "-c", "3", "-i", "0.1", "-W", "2", dst],
                    check=False)
    m = re.search(r"(\d+) packets received.*\n.*= [\d.]+/([\d.]+)/",
                  res.stdout)
    if not m:
        return f"{dst}: no reply ({res.stdout.strip().splitlines()[-1:]})"
    return f"{dst}: {m.group(1)}/3 replies, avg {m.group(2)} ms"


def _show(lab, timings):
    topo, h1 = lab.topology, lab.h1
    say(f"\nlab {lab.name} up in {timings['total']:.2f}s "
        f"(netns {lab.wire.netns})")
    say(f"  kernel       {h1.run(['uname', '-r']).stdout.strip()}")
    say(f"  controllers  {_controllers(h1)}")
    say(f"  {'host':<5} {'memory':>7} {'vCPUs':>5}  NICs")
    for host in topo.hosts:
        nics = "; ".join(
            f"{n.name} {n.ipv4 or ''} {n.ipv6 or ''}, "
            + ", ".join(f"{n.vlan_dev(v)} {v.ipv4 or ''}" for v in n.vlans)
            for n in host.nics)
        say(f"  {host.name:<5} {host.memory_mib:>4} MiB {host.cpus:>5}  "
            f"{nics}")
    for link in topo.links:
        say(f"  link {link.name}: {link.a.host}:{link.a.name} <-> "
            f"{link.b.host}:{link.b.name}, {link.queues} queue pairs, "
            f"taps {lab.wire.tap(link.a)}/{lab.wire.tap(link.b)} "
            f"in {lab.wire.netns}")
    say("\nping from h1 to h2:")
    for dst in (topo.address("h2"), topo.address("h2", VLAN)):
        say(f"  {_ping(h1, dst)}")


def demo(topology=None, name="demo"):
    topo = load(topology or paths.default_topology())
    the_lab = Lab(topo, name)
    say(f"dcblab demo: bringing up lab {name} ({topo.path}) ...")
    t0 = time.monotonic()
    try:
        timings, lab = lab_up(the_lab)
        _show(lab, timings)
        say(f"\nscenario: two cgroups on h1 send at once; net_prio maps "
            f"them to priorities {' and '.join(map(str, DEFAULT_PRIOS.values()))}"
            f" on eth0.{VLAN} ({PER_FLOW} frames each) ...")
        with tempfile.TemporaryDirectory(prefix="dcblab-demo-") as d:
            result = two_cgroups_at_once(lab, per_flow=PER_FLOW, vlan=VLAN,
                                         capture=f"{d}/l1.pcap")
        _table(result)
        say(f"  {result.rate:.0f} classified frames/s guest to guest "
            f"({result.classified} in {result.seconds:.2f} s, up to the last "
            "frame received)")
        for line in result.explain_loss():
            say(f"  {line}")
        splats = lab_splats(the_lab)
    finally:
        the_lab.down()
    say(f"\ndcblab demo: lab {name} down, netns and run dir removed "
        f"({time.monotonic() - t0:.1f}s in all)")
    if splats:
        say("kernel splats on the consoles:\n" + "\n".join(splats))
        return 1
    return _verdict(result)


def _verdict(result):
    """Exit status of the scenario: 1, with one line saying why, when a
    frame was misclassified or more than LOSS_BOUND of them were lost."""
    wrong = sum(f.misclassified for f in result.flows)
    if wrong:
        say(f"dcblab demo: FAILED: {wrong} frames arrived with another "
            "cgroup's PCP")
        return 1
    if result.loss > LOSS_BOUND:
        say(f"dcblab demo: FAILED: {result.lost} of {result.sent} frames "
            f"lost ({result.loss:.2%} > {LOSS_BOUND:.0%} bound): "
            f"{result.loss_reason()}")
        return 1
    return 0


def _dcb_lines(state):
    ets = state.ets
    tcs = ",".join(f"{p}:{tc}" for p, tc in enumerate(ets["prio_tc"]))
    tsa = " ".join(f"{t}:{a}" for t, a in enumerate(ets["tsa"])
                   if t <= max(ets["prio_tc"]))
    bw = "/".join(str(b) for b in ets["bw"][:max(ets["prio_tc"]) + 1])
    return [f"ETS  prio-tc {tcs}; tsa {tsa}; bw {bw}",
            f"PFC  {','.join(map(str, state.pfc)) or 'off'}",
            "APP  " + (", ".join(f"udp {port} -> prio {prio}"
                                 for port, prio in state.apps) or "none")]


def _chain_table(result):
    head = ("APP entry on h2 (prio,sel,port)", "cgroup on h1", "ifpriomap",
            "PCP:count on h2", "first frame")
    cells = [head]
    for p in result.phases:
        cells.append((p.what, "cgdcbx-3-4791" if p.ifpriomap else "(gone)",
                      ", ".join(f"{d} {v}" for d, v in p.ifpriomap.items()
                                if d != "lo") or "-",
                      _fmt(p.pcp) or "-", f"{p.seconds:.2f} s"))
    print_table(cells)


def demo_dcbx(topology=None, name="demo-dcbx"):
    """DCBX between the guests and the APP chain, live (see
    dcblab/scenarios/dcbx.py); exit 1 when an observation is not what the
    scenario expects."""
    topo = load(topology or paths.default_topology())
    the_lab = Lab(topo, name)
    say(f"dcblab demo dcbx: bringing up lab {name} ({topo.path}) ...")
    t0 = time.monotonic()
    wrong = []
    try:
        timings, lab = lab_up(the_lab)
        say(f"\nlab {name} up in {timings['total']:.2f}s, lldpad running in "
            "h1 and h2; h1 willing, h2 not")
        say("\nDCBX: h2 recommends ETS (ETS-REC), PFC and an APP entry; "
            "h1 takes them ...")
        n = negotiate(lab)
        say("  h1's driver before (dcb -j ... show dev eth0):")
        for line in _dcb_lines(n.before):
            say(f"    {line}")
        say(f"  h1's driver after: ETS in {n.seconds:.2f} s, all three in "
            f"{n.seconds_all:.2f} s:")
        for line in _dcb_lines(n.after):
            say(f"    {line}")
        tcs = [lab.h1.read(f"/sys/class/net/eth0/queues/tx-{q}/"
                           "traffic_class").strip() for q in range(8)]
        say(f"  h1's TX queues 0-7 now in traffic classes {' '.join(tcs)}")
        if n.after.pfc != sorted(REC_PFC):
            wrong.append(f"h1's PFC {n.after.pfc}, not {REC_PFC}")

        say(f"\nAPP chain: h2 advertises UDP {ROCE_PORT} (RoCEv2) -> "
            "priority 5, changes it to 3, withdraws it; dcbapp-netprio on "
            "h1 keeps cgdcbx-3-4791; a sender in that cgroup sends over "
            "eth0.100 ...")
        fresh_lldpad([lab.h1, lab.h2])
        r = app_chain(lab)
        _chain_table(r)
        say(f"  first row: a burst of {r.burst_sent} frames, its time the "
            "APP entry to the map on h1; the others: a steady stream, "
            "counted over 1.5 s once the new PCP arrived, their time the "
            "change on h2 to the first frame with the new PCP on h2")
        say(f"  empty cgroup removed {r.cgroup_removed:.2f} s after the "
            "sender exited")
        for p in r.phases:
            if set(p.pcp) != {p.prio}:
                wrong.append(f"{p.what}: PCPs {_fmt(p.pcp)}, not only "
                             f"{p.prio}")
        splats = lab_splats(the_lab)
    finally:
        the_lab.down()
    say(f"\ndcblab demo dcbx: lab {name} down ({time.monotonic() - t0:.1f}s "
        "in all)")
    return verdict("dcblab demo dcbx", splats, wrong)


def lab_up(the_lab):
    """Bring the_lab up, its progress printed: (timings, LabHandle)."""
    timings = the_lab.up(owner_pid=os.getpid(),
                         progress=lambda m: say(f"  {m}"))
    return timings, LabHandle(the_lab)


def lab_splats(the_lab):
    """Every kernel splat on the lab's consoles since boot."""
    return [s for m in the_lab.machines.values()
            for s in m.console.splats(since=0)]


def verdict(prog, splats, wrong):
    """A demo's exit status: 1 with the splats or each wrong observation
    printed, else 0."""
    if splats:
        say("kernel splats on the consoles:\n" + "\n".join(splats))
        return 1
    for w in wrong:
        say(f"{prog}: FAILED: {w}")
    return 1 if wrong else 0


DEMOS = ("fabric", "netprio", "dcbx", "roce")


def cmd_demo(args):
    what = list(args.what)
    kind = what.pop(0) if what and what[0] in DEMOS else "fabric"
    if args.what and args.what[0] not in DEMOS:
        raise UsageError(f"demo: unknown demo {args.what[0]!r} (known: "
                         f"{', '.join(DEMOS)}); a topology goes after it, "
                         f"e.g. `dcblab demo fabric {args.what[0]}`")
    if len(what) > 1:
        raise UsageError(f"demo: one topology at most, got "
                         f"{' '.join(what)}")
    topology = what[0] if what else None
    if kind == "dcbx" and not load(topology
                                   or paths.default_topology()).dcbx:
        raise UsageError(f"demo dcbx: topology {topology} has no "
                         "`dcbx = true`: lldpad would not run in its guests")
    if kind == "fabric" and topology:
        topo = load(topology)
        if not any(p.rate_bps and p.dcb for sw in topo.switches
                   for p in sw.nics):
            raise UsageError(f"demo fabric: topology {topology} has no "
                             "switch port with a rate and a dcb table")
    if kind == "roce":
        from .demo_roce import FABRIC, check_roce_topology
        check_roce_topology(load(topology or FABRIC))
    need_images()
    sigterm_as_exit()
    if kind == "roce":
        from .demo_roce import demo_roce
        return demo_roce(topology, args.name or "demo-roce")
    if kind == "dcbx":
        return demo_dcbx(topology, args.name or "demo-dcbx")
    if kind == "netprio":
        return demo(topology, args.name or "demo")
    from .demo_fabric import demo_fabric
    return demo_fabric(topology, args.name or "demo-fabric")


def add_parsers(sub):
    p = sub.add_parser("demo", help="the DCB priority demonstration on "
                                    "topology/dcb-fabric.toml (default); "
                                    "`demo netprio`: the two-VM net_prio "
                                    "scenario; `demo dcbx`: DCBX and the APP "
                                    "chain between two guests; `demo roce`: "
                                    "RoCEv2 over soft-RoCE through the "
                                    "fabric, with PFC and without",
                       usage="dcblab demo [-h] [--name NAME] "
                             "[fabric|netprio|dcbx|roce] [TOPOLOGY]")
    p.add_argument("what", nargs="*", metavar="[fabric|netprio|dcbx|roce] "
                                              "[TOPOLOGY]",
                   help="which demo (default fabric); a topology file "
                        "(default topology/dcb-fabric.toml for fabric and "
                        f"roce, {paths.default_topology()} for the others)")
    p.add_argument("--name", default=None,
                   help="lab name (default demo-fabric, demo, demo-dcbx, "
                        "demo-roce)")
    p.set_defaults(func=cmd_demo)
