"""`dcblab plot RESULT.json -o OUT.png`: a fabric shares result (as
SharesResult.as_json() writes it) or what priosink -j --interval MS
printed, as a picture; see dcblab/scenarios/plot.py for what it shows."""

from ..scenarios.plot import load_result, pcps, plot_result
from .common import say

__all__ = ["add_parsers", "cmd_plot"]


def cmd_plot(args):
    result = load_result(args.result)
    plot_result(result, args.output)
    say(f"dcblab plot: wrote {args.output} ({len(result['intervals'])} "
        f"intervals, PCPs {', '.join(map(str, pcps(result))) or 'none'})")
    return 0


def add_parsers(sub):
    p = sub.add_parser("plot", help="draw a result (JSON) as a PNG: a fabric "
                                    "shares result (per-PCP throughput over "
                                    "time against the expected shares, and "
                                    "the RTT probes if the result has them) "
                                    "or priosink -j --interval MS output "
                                    "(per-PCP throughput over time)")
    p.add_argument("result", metavar="RESULT.json",
                   help="a result as SharesResult.as_json() writes it, or "
                        "what priosink -j --interval MS printed (the kind "
                        "is told by its keys)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.png",
                   help="the PNG to write (its directory must exist)")
    p.set_defaults(func=cmd_plot)
