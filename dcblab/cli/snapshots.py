"""dcblab snapshots: the saved labs later `up`s restore (lab/snapshots.py),
listed or removed."""

import json
import time

from ..lab import snapshots
from .common import say

__all__ = ["add_parsers"]


def cmd_snapshots(args):
    if args.action == "rm":
        if not args.names and not args.all:
            raise snapshots.SnapshotError("snapshots rm: name the snapshots "
                                          "to remove, or --all")
        gone = snapshots.remove(None if args.all else args.names)
        if args.json:
            print(json.dumps({"removed": gone}))
        else:
            say(f"dcblab snapshots: removed {len(gone)}"
                + (f": {', '.join(gone)}" if gone else ""))
        return 0
    rows = snapshots.listing()
    if args.json:
        print(json.dumps({"dir": str(snapshots.store()),
                          "snapshots": rows}, indent=1))
        return 0
    if not rows:
        say(f"no snapshots in {snapshots.store()}: the first `dcblab up` "
            "of a topology saves one")
        return 0
    say(f"{'NAME':28} {'KEY':16} {'GUESTS':>6} {'SIZE':>8} {'SAVE':>6}  "
        "SAVED")
    for r in rows:
        if r.get("broken"):
            say(f"{r['name']:28} (no readable meta.json: `dcblab snapshots "
                f"rm {r['name']}`)")
            continue
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["created"]))
        save = f"{r['save_s']:.2f}s" if r.get("save_s") is not None else "-"
        say(f"{r['name']:28} {r['key']:16} {len(r['hosts']):>6} "
            f"{r['bytes'] / 1e6:>6.0f}MB {save:>6}  {when} by lab "
            f"{r['lab']}")
    say(f"in {snapshots.store()}")
    return 0


def add_parsers(sub):
    p = sub.add_parser(
        "snapshots", help="list or remove the saved labs `up` restores",
        description="The first `up` of a topology boots cold and saves its "
                    "ready guests; later `up`s of it restore them while "
                    "the kernel, image, topology and QEMU are unchanged. "
                    "`up --cold` (DCBLAB_SNAPSHOTS=off) uses none.")
    p.add_argument("action", nargs="?", choices=("ls", "rm"), default="ls")
    p.add_argument("names", nargs="*", help="snapshots to remove (rm)")
    p.add_argument("--all", action="store_true", help="rm: every snapshot")
    p.add_argument("-j", "--json", action="store_true", help="JSON output")
    p.set_defaults(func=cmd_snapshots)
