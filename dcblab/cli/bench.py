"""`dcblab bench`: measured figures, printed as a table (never asserted)."""

import os
import statistics
import subprocess
import sys
import tempfile
import time

from ..backends import QemuVm, VmSpec, choose_accel
from ..core import paths, proc
from ..core.errors import DcblabError
from ..lab import Lab, leftovers
from ..scenarios import two_cgroups_at_once
from ..testing import LabHandle
from ..topology import load
from .common import need_images, say, sigterm_as_exit

__all__ = ["add_parsers", "bench"]


class BenchError(DcblabError):
    pass


def _cold_build_seconds():
    with tempfile.TemporaryDirectory(prefix="bench-kernel-",
                                     dir=paths.build_dir()) as d:
        env = dict(os.environ, BUILD=d)
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "dcblab.build", "kernel"],
                           cwd=paths.ROOT, env=env, capture_output=True,
                           text=True)
        if r.returncode != 0:
            raise BenchError(f"cold build failed:\n{r.stderr}")
        return time.monotonic() - t0


def _one_vm_boots(n, accel):
    inits, guests, readies = [], [], []
    for i in range(n):
        say(f"bench: single-VM boot {i + 1}/{n}")
        with tempfile.TemporaryDirectory(prefix="dcblab-bench-") as d:
            vm = QemuVm(VmSpec(f"bench{i}", paths.bzimage(),
                               paths.initramfs(), accel=accel), d)
            with vm:
                vm.start()
                t_init, guest_init = vm.wait_init(timeout=60)
                inits.append(t_init)
                guests.append(guest_init)
                readies.append(vm.wait_ready(timeout=60))
    return inits, guests, readies


def _first_cycle(lab, args):
    """Figures measured once, on the first lab up: exec, memory, rate."""
    h1 = lab.h1
    execs = []
    for _ in range(args.execs):
        t = time.monotonic()
        h1.run(["true"])
        execs.append(time.monotonic() - t)
    mem = [proc.meminfo_used_kib(g.read("/proc/meminfo"))
           for g in lab.guests.values()]
    rss = [proc.rss_kib(m.pid) for m in lab.lab.machines.values()]
    say(f"bench: {args.frames} frames from two cgroups")
    result = two_cgroups_at_once(lab, per_flow=args.frames // 2)
    return execs, mem, rss, result


def bench(args):
    accel = choose_accel(paths.bzimage(), paths.initramfs())
    med = statistics.median
    rows = []
    if not args.no_cold_build:
        say("bench: cold kernel build in a fresh BUILD dir (minutes) ...")
        rows.append(("cold kernel build", f"{_cold_build_seconds():.1f} s",
                     f"extract+patch+config+bzImage, -j{os.cpu_count()}"))

    inits, guests, readies = _one_vm_boots(args.boots, accel)
    rows += [
        ("QEMU start -> init reached", f"{med(inits):.2f} s",
         f"one VM, median of {args.boots}, host clock to console line"),
        ("  same, guest uptime", f"{med(guests):.2f} s",
         "printk timestamp of init's first line"),
        ("QEMU start -> guest ready", f"{med(readies):.2f} s",
         "one VM, agent answers guest-sync"),
    ]

    topo = load(paths.default_topology())
    ups, leaks, cycle_s = [], 0, []
    for i in range(args.cycles):
        say(f"bench: two-VM up/down cycle {i + 1}/{args.cycles}")
        lab = Lab(topo, f"bench-{os.getpid()}")
        t0 = time.monotonic()
        try:
            ups.append(lab.up(owner_pid=os.getpid(), accel=accel)["total"])
            if i == 0:
                execs, mem, rss, result = _first_cycle(LabHandle(lab), args)
        finally:
            lab.down()
        cycle_s.append(time.monotonic() - t0)
        left = leftovers(lab.name, lab.run_id)
        if left:
            leaks += 1
            say(f"bench: cycle {i + 1} left {', '.join(left)}")
    host = topo.hosts[0]
    flows = result.flows
    rows += [
        ("up -> both ready (two-hosts)", f"{med(ups):.2f} s",
         f"median of {len(ups)} ups: wire, 2 boots, agents, baseline"),
        ("exec round trip", f"{med(execs) * 1000:.1f} ms",
         f"median of {len(execs)} guest-exec of `true` on h1"),
        ("guest RAM configured", f"{host.memory_mib} MiB", "per VM, topology"),
        ("guest RAM in use", f"{max(mem) // 1024} MiB",
         "max over VMs of MemTotal - MemAvailable after baseline"),
        ("QEMU RSS on the host", f"{max(rss) // 1024} MiB",
         "max over VMs, VmRSS after baseline"),
        ("classified frames/s", f"{result.rate:.0f}",
         f"h1 -> h2, {args.frames} UDP frames from 2 cgroups at once, "
         "counted by priosink"),
        ("misclassified", f"{sum(f.misclassified for f in flows)}",
         f"of {sum(f.received for f in flows)} received "
         f"({sum(f.lost for f in flows)} lost)"),
        ("up/down cycle", f"{med(cycle_s):.2f} s",
         f"median of {len(cycle_s)} cycles"),
        ("cycles that leaked", f"{leaks}",
         f"of {args.cycles}: qemu, netns or run dir left after down"),
    ]
    say(f"\n{'figure':<32} {'value':>10}  how measured ({accel}, "
        f"{os.cpu_count()} host cores)")
    for k, v, how in rows:
        say(f"{k:<32} {v:>10}  {how}")
    return 0


def cmd_bench(args):
    need_images()
    sigterm_as_exit()
    return bench(args)


def add_parsers(sub):
    p = sub.add_parser("bench", help="measure build, boot and lab figures")
    p.add_argument("--boots", type=int, default=5,
                   help="single-VM boots to time (default 5)")
    p.add_argument("--cycles", type=int, default=20,
                   help="two-VM up/down cycles (default 20)")
    p.add_argument("--execs", type=int, default=200,
                   help="guest-exec round trips to time (default 200)")
    p.add_argument("--frames", type=int, default=100_000,
                   help="frames of the classification run (default 10^5)")
    p.add_argument("--no-cold-build", action="store_true",
                   help="skip the cold kernel build (minutes)")
    p.set_defaults(func=cmd_bench)
