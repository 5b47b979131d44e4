"""The dcblab command line (bin/dcblab)."""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from . import paths
from .accel import choose_accel
from .vm import Vm, VmError, VmSpec

__all__ = ["main"]


def _say(msg):
    print(msg, flush=True)


def _need_images():
    missing = [str(p) for p in (paths.bzimage(), paths.initramfs())
               if not p.exists()]
    if missing:
        raise SystemExit(f"dcblab: missing {', '.join(missing)}: run "
                         "`make kernel image` first")


def _boot(name, rundir, accel):
    vm = Vm(VmSpec(name, paths.bzimage(), paths.initramfs(), accel=accel),
            rundir)
    vm.start()
    try:
        t_init, guest_init = vm.wait_init(timeout=60)
        t_ready = vm.wait_ready(timeout=60)
    except BaseException:
        vm.stop()
        raise
    return vm, t_init, guest_init, t_ready


def cmd_demo(args):
    _need_images()
    accel = choose_accel(paths.bzimage(), paths.initramfs())
    _say(f"dcblab demo: booting one guest of the patched kernel ({accel}) ...")
    with tempfile.TemporaryDirectory(prefix="dcblab-demo-") as d:
        vm, t_init, guest_init, t_ready = _boot("demo", d, accel)
        with vm:
            release = vm.run(["uname", "-r"]).stdout.strip()
            cgroups = vm.agent.read_file("/proc/cgroups").decode()
            ctl = []
            for line in cgroups.splitlines()[1:]:
                name, hier, _, enabled = line.split()
                state = f"v1 hierarchy {hier}" if int(hier) else "not mounted"
                ctl.append(f"{name} ({state}, "
                           f"{'enabled' if enabled == '1' else 'disabled'})")
            prioidx = vm.agent.read_file(
                "/sys/fs/cgroup/net_prio/net_prio.prioidx").decode().strip()
            events = vm.agent.read_file(
                "/sys/kernel/tracing/available_events").decode().split()
            tp = "net_prio:netprio_skb_update"
            rows = [
                ("kernel", release),
                ("controllers", ", ".join(ctl)),
                ("net_prio", f"root cgroup prioidx {prioidx}; tracepoint {tp} "
                             f"{'listed' if tp in events else 'MISSING'}"),
                ("boot", f"init reached at {guest_init:.2f}s guest uptime, "
                         f"{t_init:.2f}s after QEMU start; agent ready at "
                         f"{t_ready:.2f}s"),
            ]
            for k, v in rows:
                _say(f"  {k:<12} {v}")
        splats = vm.console.splats(since=0)
        if splats:
            _say("kernel splats on the console:\n" + "\n".join(splats))
            return 1
    _say("dcblab demo: guest powered off cleanly")
    return 0


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


def cmd_bench(args):
    _need_images()
    accel = choose_accel(paths.bzimage(), paths.initramfs())
    rows = []
    if not args.no_cold_build:
        _say("bench: cold kernel build in a fresh BUILD dir (several minutes)...")
        rows.append(("cold kernel build", f"{_cold_build_seconds():.1f} s",
                     f"extract+patch+config+bzImage, -j{os.cpu_count()}"))
    inits, guests, readies, execs = [], [], [], []
    for i in range(args.boots):
        _say(f"bench: boot {i + 1}/{args.boots} ({accel})")
        with tempfile.TemporaryDirectory(prefix="dcblab-bench-") as d:
            vm, t_init, guest_init, t_ready = _boot(f"bench{i}", d, accel)
            with vm:
                inits.append(t_init)
                guests.append(guest_init)
                readies.append(t_ready)
                for _ in range(args.execs // args.boots):
                    t0 = time.monotonic()
                    vm.run(["true"])
                    execs.append(time.monotonic() - t0)
    med = statistics.median
    n = args.boots
    rows += [
        ("QEMU start -> init reached", f"{med(inits):.2f} s",
         f"median of {n} boots, host clock, console line"),
        ("  init reached, guest uptime", f"{med(guests):.2f} s",
         f"median of {n} boots, printk timestamp"),
        ("QEMU start -> guest ready", f"{med(readies):.2f} s",
         f"median of {n} boots, qemu-guest-agent answers guest-sync"),
        ("exec round trip", f"{med(execs) * 1000:.1f} ms",
         f"median of {len(execs)} guest-exec of `true`"),
    ]
    _say(f"\n{'figure':<32} {'value':>10}  how measured ({accel})")
    for k, v, how in rows:
        _say(f"{k:<32} {v:>10}  {how}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="dcblab",
        description="A QEMU lab for DCB priorities and the network cgroups.")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    p = sub.add_parser("demo", help="boot one guest and show what it offers")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("bench", help="measure build and boot figures")
    p.add_argument("--boots", type=int, default=5, help="boots to time")
    p.add_argument("--execs", type=int, default=50,
                   help="guest-exec round trips to time")
    p.add_argument("--no-cold-build", action="store_true",
                   help="skip the cold kernel build (minutes)")
    p.set_defaults(func=cmd_bench)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except VmError as e:
        print(f"dcblab: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
