"""`dcblab top`: a running lab's ports, live: TX per traffic class, RX per
PCP (switch ports) or in all (hosts), drops, queue lengths and DCBX state,
refreshed every interval. A curses screen on a terminal ('q' quits), the
table as plain text each interval otherwise, or one JSON object per
interval with -j. The numbers come from dcblab.lab.top."""

import json
import os
import sys
import time

from ..core.errors import UsageError
from ..lab import Lab
from ..lab.dcbstate import share_words
from ..lab.top import Top
from .common import lab_name, named, sigterm_as_exit

__all__ = ["add_parsers", "cmd_top", "table"]

_CELL = 6    # one class's column


def _mbit(bps):
    if bps is None:
        return "?"
    v = bps / 1e6
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _row(label, kind, cells, drops="", dcbx=""):
    """cells: {class: text}, in the columns of classes 0..7."""
    return (label + f"{kind:<7}" +
            "".join(f"{cells.get(c, ''):>{_CELL}}" for c in range(8)) +
            f"{'?' if drops is None else drops:>6} {dcbx}").rstrip()


def _dcbx_words(dcbx):
    """What the tx and the rx row of a port say of its DCBX state."""
    if dcbx is None:
        return "", ""
    return ({True: "willing", False: "unwilling", None: "?"}[dcbx["willing"]],
            {True: "adopted", False: "differs", None: ""}[dcbx["adopted"]])


def _shares(dcb):
    """{tc: "20" or "str"} of the TCs a DCB uses."""
    return dict(enumerate(share_words(dcb)))


def _dcb_words(d):
    """The last column of a switch port's "ets %" row: its PFC, and the
    file's configuration when the port runs another."""
    run = d["port"]
    if run is None:
        return "(not read)"
    pfc = ",".join(map(str, run["pfc"])) or "none"
    if d["same"]:
        return f"pfc {pfc}, as the file"
    f = d["file"]
    return (f"pfc {pfc}; file: {' '.join(share_words(f))}, pfc "
            f"{','.join(map(str, f['pfc'])) or 'none'}")


def table(rep, hint=""):
    """The report as lines of text (rates in Mbit/s; drops: frames in the
    interval; qlen: frames queued at the end of it)."""
    width = max((len(m["name"]) + len(p["dev"]) + 2 for m in rep["machines"]
                 for p in m["ports"]), default=8)
    lines = [f"dcblab top: lab {rep['lab']}, every {rep['interval']:g} s, "
             f"{time.strftime('%H:%M:%S', time.localtime(rep['time']))}"
             + hint,
             _row(f"{'Mbit/s':<{width}}", "", {c: str(c) for c in range(8)},
                  "drops", "dcbx" if rep["dcbx"] else "")]
    for m in rep["machines"]:
        if m["error"]:
            lines.append(f"{m['name']:<{width}}{m['error']}")
        for p in m["ports"]:
            willing, adopted = _dcbx_words(p["dcbx"])
            tx_drops = p["drops"]["tx"]
            bands = [e for e in p["tx"] if "band" in e]
            if tx_drops is not None:
                tx_drops += sum(e["drops"] or 0 for e in bands)
            lines.append(_row(
                f"{m['name'] + ' ' + p['dev']:<{width}}", "tx TC",
                {e["tc"]: _mbit(e["bps"]) for e in p["tx"]}, tx_drops,
                willing))
            pad = " " * width
            if p.get("dcb"):
                run = p["dcb"]["port"]
                lines.append(_row(pad, "ets %", _shares(run) if run else {},
                                  "", _dcb_words(p["dcb"])))
            if bands:
                for kind, key in (("drop", "drops"),
                                  ("qlen", "backlog_packets")):
                    lines.append(_row(pad, kind, {
                        e["tc"]: "?" if e[key] is None else str(e[key])
                        for e in bands}))
            if p["rx_pcp"] is not None:
                lines.append(_row(pad, "rx PCP", {e["pcp"]: _mbit(e["bps"])
                                                  for e in p["rx_pcp"]},
                                  p["drops"]["rx"], adopted))
            else:
                lines.append(_row(pad, "rx all", {0: _mbit(p["rx"]["bps"])},
                                  p["drops"]["rx"], adopted))
    return lines


def _ticks(top, interval, count, wait):
    """A report per interval, count of them (None: no end); wait(s)
    waits up to s seconds and returns False to stop."""
    t = time.monotonic()
    before = top.sample()
    n = 0
    while count is None or n < count:
        t += interval
        if not wait(max(0.0, t - time.monotonic())):
            return
        # A sample that took longer than the interval: the next one starts
        # at once, no catching up.
        t = max(t, time.monotonic())
        after = top.sample()
        yield top.report(before, after, interval)
        before = after
        n += 1


def _sleep(seconds):
    time.sleep(seconds)
    return True


def _curses(top, args):
    import curses  # only the screen needs it

    def draw(scr, lines):
        scr.erase()
        h, w = scr.getmaxyx()
        for y, line in enumerate(lines[:h]):
            try:
                scr.addnstr(y, 0, line, w - 1)
            except curses.error:  # a terminal too small: what fits
                pass
        scr.refresh()

    def run(scr):
        try:
            curses.curs_set(0)
        except curses.error:
            pass
        shown = [f"dcblab top: lab {top.lab_name}: reading "
                 f"{', '.join(top.machines)} ...   (q quits)"]
        draw(scr, shown)

        def wait(seconds):
            end = time.monotonic() + seconds
            while True:
                scr.timeout(max(0, int((end - time.monotonic()) * 1000)))
                key = scr.getch()
                if key in (ord("q"), ord("Q")):
                    return False
                if key == curses.KEY_RESIZE:
                    draw(scr, shown)
                if key == -1 and time.monotonic() >= end:
                    return True
        for rep in _ticks(top, args.interval, args.count, wait):
            shown = table(rep, "   (q quits)")
            draw(scr, shown)
    curses.wrapper(run)


def cmd_top(args):
    if args.interval <= 0:
        raise UsageError(f"top: --interval {args.interval:g}: give a number "
                         "of seconds above 0")
    if args.count is not None and args.count < 1:
        raise UsageError(f"top: --count {args.count}: give 1 or more")
    lab = Lab.attach(lab_name(args))
    top = Top(lab.name, lab.topology, lab.machines, args.machines)
    sigterm_as_exit()
    try:
        if args.json:
            for rep in _ticks(top, args.interval, args.count, _sleep):
                print(json.dumps(rep), flush=True)
        elif sys.stdout.isatty() and sys.stdin.isatty():
            _curses(top, args)
        else:
            for i, rep in enumerate(_ticks(top, args.interval, args.count,
                                           _sleep)):
                print(("\n" if i else "") + "\n".join(table(rep)),
                      flush=True)
    except BrokenPipeError:
        # `dcblab top | head`: the reader has what it wanted.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        top.close()
    return 0


def add_parsers(sub):
    p = named(sub.add_parser(
        "top", help="live view of a running lab's ports: TX per traffic "
                    "class, RX per PCP, drops, queues, DCBX ('q' quits)",
        usage="dcblab top [--name LAB] [-j] [--interval SEC] [--count N] "
              "[MACHINE...]"))
    p.add_argument("machines", nargs="*", metavar="MACHINE",
                   help="only these hosts and switches (default: all)")
    p.add_argument("--interval", type=float, default=1.0, metavar="SEC",
                   help="seconds between refreshes (default 1)")
    p.add_argument("--count", type=int, default=None, metavar="N",
                   help="stop after N intervals (default: until 'q' or "
                        "Ctrl-C)")
    p.add_argument("-j", "--json", action="store_true",
                   help="one JSON object per interval on stdout (schema: "
                        "docs/lab.md), no screen")
    p.set_defaults(func=cmd_top)
