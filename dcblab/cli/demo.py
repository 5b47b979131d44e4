"""`dcblab demo`: the two-VM lab up, what it holds, a ping across, the
two-cgroup scenario live, down."""

import os
import re
import tempfile
import time

from ..core import paths
from ..lab import Lab
from ..scenarios import DEFAULT_PRIOS, two_cgroups_at_once
from ..testing import LabHandle
from ..topology import load
from .common import need_images, say, sigterm_as_exit

__all__ = ["add_parsers", "demo"]

PER_FLOW = 50_000
VLAN = 100
# Loss the demo tolerates (explained, exit 0) before it fails: a lab under
# TCG on a busy host may lose a few frames, and the explanation says where;
# more than this is a lab that does not keep up, not a detail.
LOSS_BOUND = 0.01


def _fmt(counts):
    return ", ".join(f"{k}:{v}" for k, v in sorted(counts.items(),
                                                    key=lambda kv: str(kv[0])))


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
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    for c in cells:
        say("  " + "  ".join(x.ljust(w) for x, w in zip(c, widths)).rstrip())


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
        timings = the_lab.up(owner_pid=os.getpid(),
                             progress=lambda m: say(f"  {m}"))
        lab = LabHandle(the_lab)
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
        splats = [s for m in the_lab.machines.values()
                  for s in m.console.splats(since=0)]
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


def cmd_demo(args):
    need_images()
    sigterm_as_exit()
    return demo(args.topology, args.name)


def add_parsers(sub):
    p = sub.add_parser("demo", help="bring the two-VM lab up, show it, ping "
                                    "across, run the two-cgroup scenario, "
                                    "bring it down")
    p.add_argument("topology", nargs="?", default=str(paths.default_topology()))
    p.add_argument("--name", default="demo", help="lab name (default demo)")
    p.set_defaults(func=cmd_demo)
