"""`dcblab demo`: the two-VM lab up, what it holds, a ping across, down."""

import os
import re
import tempfile
import time

from . import paths
from .guest import Guest
from .lab import Lab
from .topology import load
from .traffic import two_cgroups_at_once

__all__ = ["demo"]

PRIOS = {1: 2, 2: 5}      # flow -> net_prio priority of its cgroup
PER_FLOW = 50_000
VLAN_DEV = "eth0.100"


def _fmt(counts):
    return ", ".join(f"{k}:{v}" for k, v in sorted(counts.items(),
                                                    key=lambda kv: str(kv[0])))


def _table(say, rows, prios):
    head = ("cgroup", "net_prio map", "TC on h1", "PCP on wire",
            "PCP:count on h2", "lost", "misclassified")
    cells = [head]
    for r in rows:
        prio = prios[r["flow"]]
        cells.append((r["cgroup"].rsplit("/", 1)[-1], r["map"],
                      f"TC{prio}: {r['tc_h1'].get(prio, 0)}",
                      _fmt(r["wire_pcp"]) or "-", _fmt(r["pcp_h2"]) or "-",
                      str(r["lost"]), str(r["misclassified"])))
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    for c in cells:
        say("  " + "  ".join(x.ljust(w) for x, w in zip(c, widths)))


def _controllers(vm):
    out = []
    for line in vm.agent.read_file("/proc/cgroups").decode().splitlines()[1:]:
        name, hier, _, enabled = line.split()
        state = f"v1 hierarchy {hier}" if int(hier) else "not mounted"
        out.append(f"{name} ({state}, "
                   f"{'enabled' if enabled == '1' else 'disabled'})")
    return ", ".join(out)


def _ping(vm, dst):
    res = vm.run(["ping", "-c", "3", "-i", "0.1", "-W", "2", dst], check=False)
    m = re.search(r"(\d+) packets received.*\n.*= [\d.]+/([\d.]+)/",
                  res.stdout)
    if not m:
        return f"{dst}: no reply ({res.stdout.strip().splitlines()[-1:]})"
    return f"{dst}: {m.group(1)}/3 replies, avg {m.group(2)} ms"


def demo(say, topology=None, name="demo"):
    topo = load(topology or paths.ROOT / "topology" / "two-hosts.toml")
    lab = Lab(topo, name)
    say(f"dcblab demo: bringing up lab {name} ({topo.path}) ...")
    t0 = time.monotonic()
    try:
        timings = lab.up(owner_pid=os.getpid(),
                         progress=lambda m: say(f"  {m}"))
        h1, h2 = (lab.vms[h.name] for h in topo.hosts[:2])
        say(f"\nlab {name} up in {timings['total']:.2f}s "
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
        peer = topo.host(h2.name).nics[0]
        say(f"\nping from {h1.name} to {h2.name}:")
        targets = [str(peer.ipv4.ip)] if peer.ipv4 else []
        targets += [str(v.ipv4.ip) for v in peer.vlans if v.ipv4]
        for dst in targets:
            say(f"  {_ping(h1, dst)}")
        say(f"\nscenario: two cgroups on {h1.name} send at once; net_prio "
            f"maps them to priorities {PRIOS[1]} and {PRIOS[2]} on "
            f"{VLAN_DEV} ({PER_FLOW} frames each) ...")
        g1, g2 = Guest(h1), Guest(h2)
        with tempfile.TemporaryDirectory(prefix="dcblab-demo-") as d:
            rows, pps = two_cgroups_at_once(
                g1, g2, lab.wire, topo.host(h1.name).nics[0],
                str(next(v for v in peer.vlans if v.id == 100).ipv4.ip),
                PRIOS, PER_FLOW, VLAN_DEV, capture=f"{d}/l1.pcap")
        _table(say, rows, PRIOS)
        say(f"  {pps:.0f} classified frames/s guest to guest")
        splats = [s for vm in lab.vms.values()
                  for s in vm.console.splats(since=0)]
    finally:
        lab.down()
    say(f"\ndcblab demo: lab {name} down, netns and run dir removed "
        f"({time.monotonic() - t0:.1f}s in all)")
    if splats:
        say("kernel splats on the consoles:\n" + "\n".join(splats))
        return 1
    return 0
