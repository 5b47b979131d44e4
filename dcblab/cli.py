"""The dcblab command line (bin/dcblab)."""

import argparse
import json
import os
import select
import signal
import socket
import subprocess
import sys
import termios

from . import paths
from .agent import AgentError
from .bench import bench
from .cmd import CmdError
from .demo import demo
from .lab import Lab, LabError, list_labs, reap
from .topology import TopologyError, load
from .vm import VmError

__all__ = ["main"]


def _say(msg):
    print(msg, flush=True)


def _need_images():
    missing = paths.missing_images()
    if missing:
        raise SystemExit(f"dcblab: missing {', '.join(missing)}: run "
                         "`make kernel image` first")


def cmd_demo(args):
    _need_images()
    _sigterm_as_exit()
    return demo(_say, args.topology, args.name)


def cmd_bench(args):
    _need_images()
    _sigterm_as_exit()
    return bench(args, _say)


DEFAULT_TOPOLOGY = paths.ROOT / "topology" / "two-hosts.toml"


def _sigterm_as_exit():
    # SIGTERM must unwind like Ctrl-C so `up` removes what it made.
    def handler(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)


def _lab_name(args):
    if args.name:
        return args.name
    labs = list_labs()
    if len(labs) == 1:
        return labs[0]
    if not labs:
        raise LabError("no lab is up: start one with `dcblab up`")
    raise LabError(f"several labs are up ({', '.join(labs)}): pick one "
                   "with --name")


def cmd_up(args):
    topo = load(args.topology)
    _need_images()
    _sigterm_as_exit()
    lab = Lab(topo, args.name)
    _say(f"dcblab up: lab {lab.name} from {args.topology} "
         f"({len(topo.hosts)} hosts, {len(topo.links)} links)")
    timings = lab.up(owner_pid=None, progress=_say)
    if args.json:
        print(json.dumps({"name": lab.name, "run_id": lab.run_id,
                          "timings": timings}))
    _say(f"dcblab up: lab {lab.name} ready in {timings['total']:.2f}s; "
         f"`dcblab exec --name {lab.name} h1 -- ip -br addr`, "
         f"`dcblab down --name {lab.name}`")
    return 0


def _uptime(vm):
    try:
        return float(vm.agent.read_file("/proc/uptime").split()[0])
    except (AgentError, ValueError, IndexError):
        return None


def cmd_status(args):
    names = [args.name] if args.name else list_labs()
    out = []
    for name in names:
        lab = Lab.attach(name)
        hosts = []
        for hname, vm in lab.vms.items():
            host = lab.topology.host(hname)
            alive = vm.alive()
            entry = {"host": hname, "pid": vm.pid,
                     "state": "running" if alive else "gone",
                     "memory_mib": host.memory_mib, "cpus": host.cpus,
                     "uptime_s": None, "mem_used_kib": None}
            if alive and not args.quick:
                try:
                    entry["uptime_s"] = _uptime(vm)
                    mem = vm.agent.read_file("/proc/meminfo").decode()
                    kv = dict(line.split(":", 1) for line in mem.splitlines())
                    total = int(kv["MemTotal"].split()[0])
                    avail = int(kv["MemAvailable"].split()[0])
                    entry["mem_used_kib"] = total - avail
                except (AgentError, KeyError, ValueError) as e:
                    entry["state"] = f"running (agent: {e})"
                vm.agent.close()
            hosts.append(entry)
        links = [{"link": lk.name, "a": f"{lk.a.host}:{lk.a.name}",
                  "b": f"{lk.b.host}:{lk.b.name}", "queues": lk.queues}
                 for lk in lab.topology.links]
        out.append({"name": name, "run_id": lab.run_id,
                    "status": lab.state["status"], "netns": lab.wire.netns,
                    "hosts": hosts, "links": links})
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    if not out:
        _say("no lab is up")
    for lab in out:
        _say(f"lab {lab['name']} (run {lab['run_id']}, {lab['status']}, "
             f"netns {lab['netns']})")
        _say(f"  {'host':<6} {'pid':>7} {'state':<10} {'uptime':>8} "
             f"{'mem used':>10} {'configured':>11}")
        for h in lab["hosts"]:
            up = f"{h['uptime_s']:.1f}s" if h["uptime_s"] is not None else "-"
            mem = (f"{h['mem_used_kib'] // 1024} MiB"
                   if h["mem_used_kib"] is not None else "-")
            _say(f"  {h['host']:<6} {h['pid'] or '-':>7} {h['state']:<10} "
                 f"{up:>8} {mem:>10} {h['memory_mib']:>7} MiB")
        for lk in lab["links"]:
            _say(f"  link {lk['link']}: {lk['a']} <-> {lk['b']}, "
                 f"{lk['queues']} queue(s)")
    return 0


def cmd_exec(args):
    argv = args.argv
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise LabError("exec: nothing to run: dcblab exec HOST -- ARGV...")
    lab = Lab.attach(_lab_name(args))
    vm = lab.host(args.host)
    try:
        res = vm.agent.exec(argv, timeout=args.timeout)
    except AgentError as e:
        raise LabError(f"{e} (another client, e.g. a pytest session, may "
                       "hold this guest's agent socket)") from None
    sys.stdout.write(res.stdout)
    sys.stdout.flush()
    sys.stderr.write(res.stderr)
    return res.rc


def cmd_logs(args):
    lab = Lab.attach(_lab_name(args))
    sys.stdout.write(lab.host(args.host).console.text())
    return 0


def cmd_console(args):
    lab = Lab.attach(_lab_name(args))
    vm = lab.host(args.host)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(vm.rundir / "console.sock"))
    _say(f"connected to {args.host}'s serial console; detach with Ctrl-]")
    fd = sys.stdin.fileno()
    tty = os.isatty(fd)
    if tty:
        old = termios.tcgetattr(fd)
        new = termios.tcgetattr(fd)
        new[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG)
        new[0] &= ~(termios.ICRNL | termios.IXON)
        termios.tcsetattr(fd, termios.TCSANOW, new)
    try:
        while True:
            ready, _, _ = select.select([fd, sock], [], [])
            if sock in ready:
                data = sock.recv(4096)
                if not data:
                    break
                os.write(sys.stdout.fileno(), data)
            if fd in ready:
                data = os.read(fd, 1024)
                if not data or b"\x1d" in data:
                    break
                sock.sendall(data)
    finally:
        if tty:
            termios.tcsetattr(fd, termios.TCSANOW, old)
        sock.close()
    _say("\ndetached")
    return 0


def cmd_capture(args):
    lab = Lab.attach(_lab_name(args))
    link = lab.topology.link(args.link)
    tap = lab.wire.tap(link.a)
    argv = ["ip", "netns", "exec", lab.wire.netns, "tcpdump", "-i", tap,
            "-w", args.write, "-U", "-n", "-s", "0"]
    if args.count:
        argv += ["-c", str(args.count)]
    _say(f"capturing link {link.name} on the host side ({tap} in "
         f"{lab.wire.netns}) to {args.write}; Ctrl-C stops")
    try:
        proc = subprocess.run(argv, timeout=args.duration)
        return proc.returncode
    except subprocess.TimeoutExpired:
        return 0
    except KeyboardInterrupt:
        return 0


def cmd_down(args):
    lab = Lab.attach(_lab_name(args))
    lab.down()
    _say(f"dcblab down: lab {lab.name} stopped, netns and run dir removed")
    return 0


def cmd_reap(args):
    reaped = reap(say=_say)
    _say(f"dcblab reap: {len(reaped)} run(s) reaped")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="dcblab",
        description="A QEMU lab for DCB priorities and the network cgroups.")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def named(p):
        p.add_argument("--name", help="lab name (default: the only lab up)")
        return p

    p = sub.add_parser("up", help="boot all hosts of a topology, wait ready")
    p.add_argument("topology", nargs="?", default=str(DEFAULT_TOPOLOGY),
                   help="topology file (default: topology/two-hosts.toml)")
    p.add_argument("--name", help="lab name (default: the topology's name)")
    p.add_argument("-j", "--json", action="store_true", help="JSON timings")
    p.set_defaults(func=cmd_up)
    p = named(sub.add_parser("status", help="hosts, pids, state, uptime, "
                                            "memory"))
    p.add_argument("-j", "--json", action="store_true", help="JSON output")
    p.add_argument("--quick", action="store_true",
                   help="do not ask the guests (no uptime, memory)")
    p.set_defaults(func=cmd_status)
    p = named(sub.add_parser("exec", help="run ARGV in a guest; its output "
                                          "and exit code become dcblab's"))
    p.add_argument("host")
    p.add_argument("argv", nargs=argparse.REMAINDER, help="-- ARGV...")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds (default 60)")
    p.set_defaults(func=cmd_exec)
    p = named(sub.add_parser("console", help="interactive serial console "
                                             "(detach: Ctrl-])"))
    p.add_argument("host")
    p.set_defaults(func=cmd_console)
    p = named(sub.add_parser("logs", help="print a guest's captured console"))
    p.add_argument("host")
    p.set_defaults(func=cmd_logs)
    p = named(sub.add_parser("capture", help="record a link's frames from "
                                             "the host side (pcap)"))
    p.add_argument("link")
    p.add_argument("-w", "--write", required=True, metavar="FILE.pcap")
    p.add_argument("-c", "--count", type=int, help="stop after N frames")
    p.add_argument("--duration", type=float, help="stop after N seconds")
    p.set_defaults(func=cmd_capture)
    p = named(sub.add_parser("down", help="stop a lab, remove its netns and "
                                          "run dir"))
    p.set_defaults(func=cmd_down)
    p = sub.add_parser("reap", help="remove labs whose owner died (by run id)")
    p.set_defaults(func=cmd_reap)
    p = sub.add_parser("demo", help="bring the two-VM lab up, show it, ping "
                                    "across, bring it down")
    p.add_argument("topology", nargs="?", default=str(DEFAULT_TOPOLOGY))
    p.add_argument("--name", default="demo", help="lab name (default demo)")
    p.set_defaults(func=cmd_demo)
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
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except TopologyError as e:
        print(f"dcblab: {e}", file=sys.stderr)
        return 2
    except (VmError, LabError, CmdError, AgentError) as e:
        print(f"dcblab: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
