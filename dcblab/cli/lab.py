"""Lab lifecycle commands: up, status, down, restart, reap."""

import json

from ..backends import DEFAULT as DEFAULT_BACKEND
from ..backends import names as backend_names
from ..core import paths, proc
from ..guest import AgentError
from ..lab import Lab, LabError, keeper_alive, list_labs, rc_text, reap
from ..topology import load
from .common import (lab_name, named, need_images, note, say,
                     sigterm_as_exit)

__all__ = ["add_parsers"]


def cmd_up(args):
    topo = load(args.topology)
    need_images()
    sigterm_as_exit()
    lab = Lab(topo, args.name, backend=args.backend)
    # With -j, stdout carries the JSON only: progress goes to stderr.
    log = note if args.json else say
    log(f"dcblab up: lab {lab.name} from {args.topology} "
        f"({_machines(topo)})")
    timings = lab.up(owner_pid=None, progress=log, cold=args.cold)
    state = lab.state
    info = state.get("backend_info", {})
    if args.json:
        print(json.dumps({"name": lab.name, "run_id": lab.run_id,
                          "backend": lab.backend.name, **info,
                          "snapshot": state.get("snapshot"),
                          "timings": timings}))
    log(f"dcblab up: lab {lab.name} ready in {timings['total']:.2f}s; "
        f"`dcblab shell --name {lab.name} h1`, "
        f"`dcblab down --name {lab.name}`")
    if "uri" in info and not args.json:
        # For the user's shell: virsh list, dumpxml h1, console h1.
        log("dcblab up: virsh reaches this lab's libvirtd with:")
        print(f"export LIBVIRT_DEFAULT_URI='{info['uri']}'", flush=True)
    return 0


def _count(n, what):
    return f"{n} {what}{'es' if what.endswith('h') else 's'}" if n != 1 \
        else f"1 {what}"


def _machines(topo):
    """"3 hosts, 1 switch, 3 links": hosts and switches counted apart;
    a lab across machines names them and its cross-machine links."""
    switches = len(topo.switches)
    parts = [_count(len(topo.hosts) - switches, "host")]
    if switches:
        parts.append(_count(switches, "switch"))
    parts.append(_count(len(topo.links), "link"))
    if topo.split:
        names = [m or "this one" for m in topo.machine_names]
        parts.append(f"on machines {', '.join(names)}, "
                     f"{len(topo.cross_links)} across in VXLAN")
    return ", ".join(parts)


def _ask_guest(machine, entry):
    try:
        uptime = machine.agent.read_file("/proc/uptime").decode()
        entry["uptime_s"] = float(uptime.split()[0])
        entry["mem_used_kib"] = proc.meminfo_used_kib(
            machine.agent.read_file("/proc/meminfo").decode())
    except (AgentError, LabError, KeyError, ValueError, IndexError) as e:
        entry["state"] = f"running (agent: {e})"
    finally:
        machine.agent.close()


def _lab_status(name, quick):
    lab = Lab.attach(name)
    state = lab.state
    keeper = state.get("keeper_pid")
    kept = keeper_alive(state)
    owner = state.get("owner_pid")
    hosts = []
    for hname, m in lab.machines.items():
        host = lab.topology.host(hname)
        recorded = state["hosts"][hname]
        st = recorded.get("state", "running")
        machine = recorded.get("machine")
        # A guest on another machine: its pid is that machine's, and the
        # keeper watches it through libvirt.
        if st == "running" and not machine and not proc.running(m.pid):
            st = "gone"
        entry = {"host": hname, "pid": m.pid, "state": st,
                 **({"machine": machine} if machine else {}),
                 "memory_mib": host.memory_mib, "cpus": host.cpus,
                 "uptime_s": None, "mem_used_kib": None}
        if st == "gone":
            entry["rc"] = recorded.get("rc")
            entry["log"] = recorded.get("log", str(m.log_path()))
            entry["console_tail"] = m.console.tail(5)
        elif st == "running" and kept and not quick:
            _ask_guest(m, entry)
        hosts.append(entry)
    links = [{"link": lk.name, "a": f"{lk.a.host}:{lk.a.name}",
              "b": f"{lk.b.host}:{lk.b.name}", "queues": lk.queues}
             for lk in lab.topology.links]
    return {"name": name, "run_id": lab.run_id,
            "status": state["status"] if kept else "keeper gone",
            "keeper_pid": keeper if kept else None,
            "owner_pid": owner, "source": state.get("source"),
            "backend": lab.backend.name, "flavour": lab.flavour.name,
            **state.get("backend_info", {}),
            "netns": lab.wire.netns, "snapshot": state.get("snapshot"),
            "machines": state.get("machines", {}),
            "hosts": hosts, "links": links}


def cmd_status(args):
    names = [args.name] if args.name is not None else list_labs()
    out = [_lab_status(name, args.quick) for name in names]
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    if not out:
        say("no lab is up")
    for lab in out:
        owner = f", owned by pid {lab['owner_pid']}" if lab["owner_pid"] \
            else ""
        machines = sorted(m for m in lab.get("machines", {}) if m)
        backend = (f"libvirt backend on machines {', '.join(machines)}"
                   if machines else f"{lab['backend']} backend")
        say(f"lab {lab['name']} (run {lab['run_id']}, {lab['status']}, "
            f"keeper pid {lab['keeper_pid'] or '-'}{owner}, netns "
            f"{lab['netns']}, {backend}, {lab['flavour']} kernel)")
        if lab.get("uri"):
            say(f"  libvirtd pid {lab['daemon_pid']}: virsh -c "
                f"'{lab['uri']}' list")
        for m, info in sorted(lab.get("machines", {}).items()):
            on = [h["host"] for h in lab["hosts"] if h.get("machine") == m]
            say(f"  machine {m or 'here'} ({', '.join(sorted(on))}): virsh "
                f"-c '{info.get('uri', '')}' list")
        snap = lab.get("snapshot")
        if snap and (snap["restored"] or snap["saved"]):
            how = "restored from" if snap["restored"] else "saved as"
            say(f"  guests {how} snapshot {snap['slot']} (key "
                f"{snap['key']}): `dcblab snapshots`")
        if lab["keeper_pid"] is None:
            say("  its keeper died: `dcblab reap` removes what it left")
        say(f"  {'host':<6} {'pid':>7} {'state':<10} {'vCPUs':>5} "
            f"{'uptime':>8} {'mem used':>10} {'configured':>11}")
        for h in lab["hosts"]:
            up = f"{h['uptime_s']:.1f}s" if h["uptime_s"] is not None else "-"
            mem = (f"{h['mem_used_kib'] // 1024} MiB"
                   if h["mem_used_kib"] is not None else "-")
            # A pid on another machine is that machine's: "b:170".
            pid = f"{h['machine']}:{h['pid']}" if h.get("machine") else \
                h["pid"] or "-"
            say(f"  {h['host']:<6} {pid:>7} {h['state']:<10} "
                f"{h['cpus']:>5} {up:>8} {mem:>10} {h['memory_mib']:>7} MiB")
        for lk in lab["links"]:
            say(f"  link {lk['link']}: {lk['a']} <-> {lk['b']}, "
                f"{lk['queues']} queue{'s' if lk['queues'] != 1 else ''}")
        for h in lab["hosts"]:
            if h["state"] == "gone":
                say(f"  {h['host']} is gone (QEMU rc "
                    f"{rc_text(h.get('rc'))}): "
                    f"{h['log']}; `dcblab restart --name {lab['name']} "
                    f"{h['host']}` starts it again; its console's last "
                    "lines:")
                for line in h["console_tail"].splitlines():
                    say(f"    {line}")
    return 0


def cmd_down(args):
    lab = Lab.attach(lab_name(args))
    lab.down()
    say(f"dcblab down: lab {lab.name} stopped, netns and run dir removed")
    return 0


def cmd_restart(args):
    lab = Lab.attach(lab_name(args))
    say(f"dcblab restart: {args.host} of lab {lab.name}")
    t = lab.restart(args.host)
    say(f"dcblab restart: {args.host} ready in {t['ready']:.2f}s (init "
        f"{t['init']:.2f}s, agent {t['agent']:.2f}s), baseline applied")
    return 0


def cmd_reap(args):
    reaped = reap(say=say)
    say(f"dcblab reap: {len(reaped)} run(s) reaped")
    return 0


def add_parsers(sub):
    p = sub.add_parser("up", help="boot all hosts of a topology, wait ready")
    p.add_argument("topology", nargs="?", default=str(paths.default_topology()),
                   help="topology file (default: topology/two-hosts.toml)")
    p.add_argument("--name", help="lab name (default: the topology's name)")
    p.add_argument("--backend", choices=backend_names(),
                   help=f"how guests run: qemu (QEMU run directly) or "
                        "libvirt (domains of a private libvirtd in the lab's "
                        f"netns); default: DCBLAB_BACKEND, else "
                        f"{DEFAULT_BACKEND}")
    p.add_argument("--cold", action="store_true",
                   help="boot every guest: neither restore the topology's "
                        "snapshot nor save one (DCBLAB_SNAPSHOTS=off: "
                        "always)")
    p.add_argument("-j", "--json", action="store_true",
                   help="JSON timings on stdout (progress on stderr)")
    p.set_defaults(func=cmd_up)
    p = named(sub.add_parser("status", help="hosts, pids, state, uptime, "
                                            "memory"))
    p.add_argument("-j", "--json", action="store_true", help="JSON output")
    p.add_argument("--quick", action="store_true",
                   help="do not ask the guests (no uptime, memory)")
    p.set_defaults(func=cmd_status)
    p = named(sub.add_parser("down", help="stop a lab, remove its netns and "
                                          "run dir"))
    p.set_defaults(func=cmd_down)
    p = named(sub.add_parser("restart", help="stop and start one host "
                                             "(baseline applied again)"))
    p.add_argument("host")
    p.set_defaults(func=cmd_restart)
    p = sub.add_parser("reap", help="remove labs whose keeper died (by run "
                                    "id)")
    p.set_defaults(func=cmd_reap)
