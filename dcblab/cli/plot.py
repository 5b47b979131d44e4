"""`dcblab plot RESULT.json -o OUT.png`: a fabric shares result (as
SharesResult.as_json() writes it) as a picture; see
dcblab/scenarios/plot.py for what it shows."""

from ..scenarios.plot import load_result, pcps, plot_result
from .common import say

__all__ = ["add_parsers", "cmd_plot"]


def cmd_plot(args):
    result = load_result(args.result)
    plot_result(result, args.output)
    say(f"dcblab plot: wrote {args.output} ({len(result['intervals'])} "
        f"intervals, PCPs {', '.join(map(str, pcps(result)))})")
    return 0


def add_parsers(sub):
    p = sub.add_parser("plot", help="draw a fabric shares result (JSON) as a "
                                    "PNG: per-PCP throughput over time "
                                    "against the expected shares, and the "
                                    "RTT probes if the result has them")
    p.add_argument("result", metavar="RESULT.json",
                   help="a result as SharesResult.as_json() writes it")
    p.add_argument("-o", "--output", required=True, metavar="OUT.png",
                   help="the PNG to write (its directory must exist)")
    p.set_defaults(func=cmd_plot)
