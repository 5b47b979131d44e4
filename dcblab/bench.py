"""`dcblab bench`: measured figures, printed as a table (never asserted)."""

import os
import statistics
import subprocess
import sys
import tempfile
import time

from . import paths, wire
from .accel import choose_accel
from .guest import Guest
from .lab import Lab, _qemu_pids, run_root
from .topology import load
from .traffic import two_cgroups_at_once
from .vm import Vm, VmSpec

__all__ = ["bench"]


def _cold_build_seconds():
    with tempfile.TemporaryDirectory(prefix="bench-kernel-",
                                     dir=paths.build_dir()) as d:
        env = dict(os.environ, BUILD=d)
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "dcblab.build", "kernel"],
                           cwd=paths.ROOT, env=env, capture_output=True,
                           text=True)
        if r.returncode != 0:
            raise SystemExit(f"dcblab bench: cold build failed:\n{r.stderr}")
        return time.monotonic() - t0


def _one_vm_boots(n, accel, say):
    inits, guests, readies = [], [], []
    for i in range(n):
        say(f"bench: single-VM boot {i + 1}/{n}")
        with tempfile.TemporaryDirectory(prefix="dcblab-bench-") as d:
            vm = Vm(VmSpec(f"bench{i}", paths.bzimage(), paths.initramfs(),
                           accel=accel), d)
            with vm:
                vm.start()
                t_init, guest_init = vm.wait_init(timeout=60)
                inits.append(t_init)
                guests.append(guest_init)
                readies.append(vm.wait_ready(timeout=60))
    return inits, guests, readies


def _rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _leftovers(lab):
    left = []
    if _qemu_pids(lab.run_id):
        left.append("qemu")
    if lab.wire.netns in wire.list_netns():
        left.append("netns")
    if (run_root() / lab.name).exists():
        left.append("rundir")
    return left


def bench(args, say):
    accel = choose_accel(paths.bzimage(), paths.initramfs())
    med = statistics.median
    rows = []
    if not args.no_cold_build:
        say("bench: cold kernel build in a fresh BUILD dir (minutes) ...")
        rows.append(("cold kernel build", f"{_cold_build_seconds():.1f} s",
                     f"extract+patch+config+bzImage, -j{os.cpu_count()}"))

    inits, guests, readies = _one_vm_boots(args.boots, accel, say)
    rows += [
        ("QEMU start -> init reached", f"{med(inits):.2f} s",
         f"one VM, median of {args.boots}, host clock to console line"),
        ("  same, guest uptime", f"{med(guests):.2f} s",
         "printk timestamp of init's first line"),
        ("QEMU start -> guest ready", f"{med(readies):.2f} s",
         "one VM, agent answers guest-sync"),
    ]

    topo = load(paths.ROOT / "topology" / "two-hosts.toml")
    ups, leaks, cycle_s = [], 0, []
    for i in range(args.cycles):
        say(f"bench: two-VM up/down cycle {i + 1}/{args.cycles}")
        lab = Lab(topo, f"bench-{os.getpid()}")
        t0 = time.monotonic()
        try:
            ups.append(lab.up(owner_pid=os.getpid(), accel=accel)["total"])
            if i == 0:
                execs, mem, rss = [], [], []
                h1 = lab.vms[topo.hosts[0].name]
                for _ in range(args.execs):
                    t = time.monotonic()
                    h1.run(["true"])
                    execs.append(time.monotonic() - t)
                for vm in lab.vms.values():
                    info = vm.agent.read_file("/proc/meminfo").decode()
                    kv = dict(ln.split(":", 1) for ln in info.splitlines())
                    mem.append(int(kv["MemTotal"].split()[0])
                               - int(kv["MemAvailable"].split()[0]))
                    rss.append(_rss_kib(vm.pid))
                h2 = lab.vms[topo.hosts[1].name]
                peer = topo.hosts[1].nics[0]
                dst = str(next(v for v in peer.vlans if v.id == 100).ipv4.ip)
                say(f"bench: {args.frames} frames from two cgroups")
                flows, pps = two_cgroups_at_once(
                    Guest(h1), Guest(h2), lab.wire, topo.hosts[0].nics[0],
                    dst, {1: 2, 2: 5}, args.frames // 2)
        finally:
            lab.down()
        cycle_s.append(time.monotonic() - t0)
        left = _leftovers(lab)
        if left:
            leaks += 1
            say(f"bench: cycle {i + 1} left {', '.join(left)}")
    host = topo.hosts[0]
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
        ("classified frames/s", f"{pps:.0f}",
         f"h1 -> h2, {args.frames} UDP frames from 2 cgroups at once, "
         "counted by priosink"),
        ("misclassified", f"{sum(r['misclassified'] for r in flows)}",
         f"of {sum(r['received'] for r in flows)} received "
         f"({sum(r['lost'] for r in flows)} lost)"),
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
