"""`dcblab soak`: labs up and down, some killed, a census after each
(dcblab/scenarios/soak.py); `make soak` runs it."""

import json
import statistics

from ..core.errors import DcblabError, UsageError
from ..scenarios.soak import (DEFAULT_BUDGET_S, DEFAULT_CLEAN, DEFAULT_KILLED,
                              soak)
from ..testing.census import CATEGORIES
from .common import need_images, note, say, sigterm_as_exit

__all__ = ["add_parsers", "header", "cycle_line", "summary", "plan_line"]

# Census columns: category -> header.
_COLUMNS = {"qemu": "qemu", "libvirtd": "lvd", "processes": "proc",
            "netns": "netns", "taps": "tap", "run dirs": "rdir",
            "mounts": "mnt", "writes": "wrt", "fds": "fd"}


class SoakFailed(DcblabError):
    """A cycle leaked or failed: the message is its one-line report."""


def plan_line(seed, cycles, budget_s):
    """The first line: the seed and how to replay it."""
    kinds = [c.kind for c in cycles]
    clean, killed = kinds.count("clean"), kinds.count("killed")
    counts = "" if (clean, killed) == (DEFAULT_CLEAN, DEFAULT_KILLED) else \
        f" --clean {clean} --killed {killed}"
    return (f"soak: seed {seed}: {clean} clean + {killed} killed cycles, "
            f"budget {budget_s:.0f} s (replay: dcblab soak --seed "
            f"{seed}{counts})")


def header():
    census = " ".join(f"{_COLUMNS[k]:>{max(len(_COLUMNS[k]), 2)}}"
                      for k in CATEGORIES)
    return (f"{'cyc':>3} {'kind':<6} {'backend':<7} {'victim':<6} "
            f"{'phase':<8} {'kill at':>7} {'lab then':<12} {'up s':>5} "
            f"{'down s':>6} "
            f"{'gone s':>6} {'reap':>4}  {census} {'files':>6}")


def _num(v, fmt=".2f"):
    return "-" if v is None else format(v, fmt)


def cycle_line(c):
    """One line: the cycle, its kill, its times and its census."""
    kl = c.kill
    if kl is None:
        kill, status, gone = "-", "-", None
    elif kl.at is None:
        kill, status, gone = "missed", "-", None
    else:
        kill, status, gone = f"{kl.at:.2f}", kl.lab_status, kl.settle_s
    counts = c.census.counts() if c.census else {}
    census = " ".join(
        f"{_num(counts.get(k), 'd'):>{max(len(_COLUMNS[k]), 2)}}"
        for k in CATEGORIES)
    files = _num(c.census.file_handles if c.census else None, "+d")
    line = (f"{c.plan.n:>3} {c.plan.kind:<6} {c.plan.backend:<7} "
            f"{c.plan.victim or '-':<6} {c.plan.phase or '-':<8} "
            f"{kill:>7} {status:<12} "
            f"{_num(c.up_s):>5} {_num(c.down_s):>6} {_num(gone):>6} "
            f"{_num(c.reaped, 'd'):>4}  {census} {files:>6}")
    return line + (f"  FAILED: {c.error}" if c.error else "")


def summary(r):
    """The soak's figures, one line each."""
    med = statistics.median
    kinds = r.kinds()
    lines = [f"soak: {len(r.cycles)} of {len(r.planned)} cycles "
             f"({kinds['clean']} clean, {kinds['killed']} killed) in "
             f"{r.seconds:.0f} s; {r.leaks} leaked"]
    times = []
    if r.ups():
        by = ", ".join(f"{b} {med(r.ups(b)):.2f} s" for b in ("qemu",
                                                               "libvirt")
                       if r.ups(b))
        times.append(f"`dcblab up` median {med(r.ups()):.2f} s ({by})")
    if r.downs():
        times.append(f"`dcblab down` median {med(r.downs()):.2f} s")
    if times:
        lines.append(f"soak: {', '.join(times)}")
    if r.settles():
        lines.append(f"soak: a killed lab was gone {med(r.settles()):.2f} s "
                     f"after its kill (median, max {max(r.settles()):.2f} "
                     "s), before `dcblab reap`")
    lines.append(f"soak: driver fds {r.fds_start} -> {r.fds_end}; host file "
                 f"handles {r.file_handles_start} -> {r.file_handles_end} "
                 f"({r.file_handles_end - r.file_handles_start:+d}, the "
                 "whole machine's); load "
                 f"{r.load_start[0]:.1f} -> {r.load_end[0]:.1f}, "
                 f"{r.other_qemus} other QEMU process(es) at the start")
    if r.stopped == "budget":
        lines.append(f"soak: stopped by the budget ({r.budget_s:.0f} s): the "
                     f"next cycle would not have ended within it; ran "
                     f"{len(r.cycles)} of {len(r.planned)}")
    return lines


def cmd_soak(args):
    if args.clean < 0 or args.killed < 0 or args.clean + args.killed == 0:
        raise UsageError(f"soak: --clean {args.clean} --killed "
                         f"{args.killed}: want counts >= 0, not both 0")
    if args.budget <= 0:
        raise UsageError(f"soak: --budget {args.budget}: want seconds > 0")
    need_images()
    sigterm_as_exit()
    out = note if args.json else say

    def start(seed, cycles):
        out(plan_line(seed, cycles, args.budget))
        out(header())

    r = soak(args.seed, args.clean, args.killed, args.budget,
             on_start=start, on_cycle=lambda c: out(cycle_line(c)))
    for line in summary(r):
        out(line)
    if args.json:
        print(json.dumps(r.as_dict(), indent=1))
    if r.report:
        raise SoakFailed(f"soak: {r.report}")
    return 0


def add_parsers(sub):
    p = sub.add_parser(
        "soak", help="labs up/down, some with up, the keeper or pytest "
                     "SIGKILLed; a leak census after each")
    p.add_argument("--seed", type=int,
                   help="the seed of the plan (default: a random one, "
                        "printed first; the same seed replays the same "
                        "cycles, victims and kill times)")
    p.add_argument("--clean", type=int, default=DEFAULT_CLEAN,
                   help=f"up, exec, down cycles (default {DEFAULT_CLEAN})")
    p.add_argument("--killed", type=int, default=DEFAULT_KILLED,
                   help="cycles with `up`, the keeper or a pytest session "
                        f"SIGKILLed, then `dcblab reap` (default "
                        f"{DEFAULT_KILLED})")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S,
                   help="seconds: no cycle is started that would not end "
                        f"within them (default {DEFAULT_BUDGET_S:.0f})")
    p.add_argument("-j", "--json", action="store_true",
                   help="the result as JSON on stdout (lines on stderr)")
    p.set_defaults(func=cmd_soak)
