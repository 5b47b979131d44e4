"""Commands on the lab's wire: capture, link."""

import json
import subprocess

from ..core.errors import UsageError
from ..lab import Lab
from .common import lab_name, named, say

__all__ = ["add_parsers"]


def cmd_capture(args):
    lab = Lab.attach(lab_name(args))
    link = lab.topology.link(args.link)
    tap = lab.wire.tap(link.a)
    # A lab across machines: tcpdump where the tap is, the pcap here.
    part = lab.wire.part(link.a.host) if hasattr(lab.wire, "parts") \
        else lab.wire
    out = None if part is lab.wire else open(args.write, "wb")
    argv = part.argv(["tcpdump", "-i", tap, "-w",
                      args.write if out is None else "-", "-U", "-n", "-s",
                      "0"] + (["-c", str(args.count)] if args.count else []))
    where = f" on machine {part.machine}" if out is not None else ""
    say(f"capturing link {link.name} on the host side ({tap} in "
        f"{lab.wire.netns}{where}) to {args.write}; Ctrl-C stops")
    try:
        return subprocess.run(argv, timeout=args.duration,
                              stdout=out).returncode
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        return 0
    finally:
        if out is not None:
            out.close()


_FAULT_OPTIONS = ("loss", "duplicate", "reorder", "gap", "corrupt", "delay",
                  "jitter", "limit")


def cmd_link(args):
    from ..lab.faults import LinkFaults, make_fault
    lab = Lab.attach(lab_name(args))
    faults = LinkFaults(lab, args.link)
    given = [o for o in _FAULT_OPTIONS if getattr(args, o) is not None]
    queues = _queues(args.queue)
    if args.action and (given or args.clear or queues or args.only):
        raise UsageError(f"link {args.action}: the cable is pulled or "
                         "plugged at both ends; it takes no fault option")
    if args.clear and given:
        raise UsageError(f"link --clear: takes no fault option (--"
                         f"{given[0]} given)")
    if queues and not given:
        raise UsageError("link --queue: give the fault too (e.g. --loss 5% "
                         "--queue 5)")
    if args.action:
        plugged = args.action == "up"
        seconds = faults.cable(plugged)
        if not args.json:
            say(f"link {args.link}: cable {'plugged' if plugged else 'pulled'}"
                f": both ends' carrier {'on' if plugged else 'off'} "
                f"({seconds:.2f}s, {lab.backend.name} backend)")
        ends = faults.show()
    elif args.clear:
        ends = faults.clear(args.only)
    elif given:
        fault = make_fault(queues=queues, **{o: getattr(args, o)
                                             for o in _FAULT_OPTIONS})
        ends = faults.set(fault, args.only)
    else:
        ends = faults.show(args.only)
    if args.json:
        print(json.dumps({"link": faults.link.name, "queues":
                          faults.link.queues,
                          "ends": [e.json() for e in ends]}))
        return 0
    _table(faults.link, ends)
    return 0


def _queues(words):
    out = []
    for word in words or ():
        for part in word.split(","):
            try:
                out.append(int(part))
            except ValueError:
                raise UsageError(f"--queue {word!r}: give TX queue numbers "
                                 "(from 0), e.g. --queue 5 or --queue "
                                 "0,1") from None
    return out


def _table(link, ends):
    say(f"link {link.name}: {link.a.host}:{link.a.name} <-> "
        f"{link.b.host}:{link.b.name}, {link.queues} queue"
        f"{'s' if link.queues != 1 else ''}; a fault is netem in the guest, "
        "on the frames its end sends")
    rows = [("from", "carrier", "fault", "netem", "sent", "dropped",
             "requeues")]
    for e in ends:
        carrier = {True: "on", False: "off"}.get(e.carrier, "-")
        if e.netems:
            rows.append((e.nic, carrier, e.fault, e.placement,
                         *(str(e.total(k)) for k in ("sent", "dropped",
                                                      "requeues"))))
        else:
            rows.append((e.nic, carrier, "none", "-", "-", "-", "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        cells = [c.ljust(w) if i < 4 else c.rjust(w)
                 for i, (c, w) in enumerate(zip(r, widths))]
        say("  " + "  ".join(cells).rstrip())
    if any(e.netems for e in ends):
        say("  (netem's own counters: sent includes its duplicates; "
            "requeues are the frames it sent ahead of the others)")
    for e in ends:
        if e.total("child_dropped"):
            say(f"  {e.nic}: the ETS qdisc under its netem dropped "
                f"{e.total('child_dropped')} more (the port's scheduler: "
                "netem counts those in its drops too, not shown above)")


_LINK_HELP = """\
With no option: the link's two ends, their carrier, the fault at each
and netem's counters. A fault is netem in the guests' kernels, at the
egress of each end (both directions; --from one end only): the host the
lab runs on may have no sch_netem, and dcblab never loads a kernel module
on the host. On a host's NIC it is one netem per TX queue, after priority,
TC, queue, VLAN tag and PCP were decided, as on a real wire; on a switch
port with a shaper or ETS, one netem above ETS. Each call sets the whole
fault: what it leaves out is off. `dcblab reset HOST` and `dcblab restart
HOST` clear the faults at HOST's ends; a reset leaves the cable as it is,
a restarted host comes back with its end plugged. netem in these guests
(Linux 6.1) has no seed: each run draws anew; its counters say what
happened. docs/faults.md.
"""


def add_parsers(sub):
    p = named(sub.add_parser("capture", help="record a link's frames from "
                                             "the host side (pcap)"))
    p.add_argument("link")
    p.add_argument("-w", "--write", required=True, metavar="FILE.pcap")
    p.add_argument("-c", "--count", type=int, help="stop after N frames")
    p.add_argument("--duration", type=float, help="stop after N seconds")
    p.set_defaults(func=cmd_capture)

    p = named(sub.add_parser(
        "link", help="a link's faults (netem loss, duplicate, reorder, "
                     "delay) and its cable (down, up)",
        description=_LINK_HELP))
    p.add_argument("link")
    p.add_argument("action", nargs="?", choices=("down", "up"),
                   help="pull (down) or plug (up) the cable: both NICs "
                        "lose or get their carrier (QMP set_link on the "
                        "qemu backend, the interface's link state on "
                        "libvirt)")
    p.add_argument("--loss", metavar="PCT", help="drop PCT%% of the frames")
    p.add_argument("--duplicate", metavar="PCT",
                   help="send PCT%% of the frames twice (the kernel allows "
                        "it on one TX queue of a multi-queue NIC: --queue)")
    p.add_argument("--reorder", metavar="PCT",
                   help="send PCT%% of the frames at once, the others after "
                        "--delay (needs --delay)")
    p.add_argument("--gap", type=int, metavar="N",
                   help="with --reorder: every Nth frame goes at once (with "
                        "--reorder's probability); default 1")
    p.add_argument("--delay", metavar="TIME", help="delay every frame, "
                   "e.g. 10ms")
    p.add_argument("--jitter", metavar="TIME",
                   help="vary --delay by up to TIME (frames then overtake "
                        "each other too)")
    p.add_argument("--corrupt", metavar="PCT",
                   help="flip one bit in PCT%% of the frames")
    p.add_argument("--limit", type=int, metavar="N",
                   help="netem's queue, in frames (default 1000): room for "
                        "what --delay holds (frames/s x delay); above a "
                        "switch port's ETS at least 10000")
    p.add_argument("--queue", action="append", metavar="N[,N...]",
                   help="only these TX queues (from 0; default all)")
    p.add_argument("--from", dest="only", metavar="HOST",
                   help="only the end on HOST (the frames it sends): set, "
                        "clear or show that end")
    p.add_argument("--clear", action="store_true",
                   help="take the faults off (both ends, or --from's)")
    p.add_argument("-j", "--json", action="store_true", help="JSON output")
    p.set_defaults(func=cmd_link)
