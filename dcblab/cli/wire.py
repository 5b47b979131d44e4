"""Commands on the lab's wire: capture."""

import subprocess

from ..lab import Lab
from .common import lab_name, named, say

__all__ = ["add_parsers"]


def cmd_capture(args):
    lab = Lab.attach(lab_name(args))
    link = lab.topology.link(args.link)
    tap = lab.wire.tap(link.a)
    argv = ["ip", "netns", "exec", lab.wire.netns, "tcpdump", "-i", tap,
            "-w", args.write, "-U", "-n", "-s", "0"]
    if args.count:
        argv += ["-c", str(args.count)]
    say(f"capturing link {link.name} on the host side ({tap} in "
        f"{lab.wire.netns}) to {args.write}; Ctrl-C stops")
    try:
        return subprocess.run(argv, timeout=args.duration).returncode
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        return 0


def add_parsers(sub):
    p = named(sub.add_parser("capture", help="record a link's frames from "
                                             "the host side (pcap)"))
    p.add_argument("link")
    p.add_argument("-w", "--write", required=True, metavar="FILE.pcap")
    p.add_argument("-c", "--count", type=int, help="stop after N frames")
    p.add_argument("--duration", type=float, help="stop after N seconds")
    p.set_defaults(func=cmd_capture)
