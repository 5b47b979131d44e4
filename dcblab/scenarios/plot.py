"""A result as a picture: `dcblab plot RESULT.json -o OUT.png`.

Two kinds of input, told apart by their keys (result_kind):

- what ``SharesResult.as_json()`` (fabric.py) writes ("rate_bps",
  "expected"): per-PCP throughput over time from h3's priosink intervals
  against each PCP's expected share of the port, and, when the result
  carries an ``rtt`` section, the RTT probes' round trips on the same time
  axis below (a ``pause`` section: the time PFC kept each sender paused);
- what the guest tool priosink prints with ``-j`` ("flows"), run with
  ``--interval MS`` so that it has "intervals": per-PCP throughput over
  time at the receiver, every PCP that carried a byte.

matplotlib is imported only when a plot is drawn, so importing dcblab
never needs it; the figure is drawn on an Agg canvas of its own (no
pyplot, no display, no global backend switch).
"""

import json
import os
import math
import statistics
from pathlib import Path
from types import SimpleNamespace

from ..core import paths
from ..core.errors import DcblabError, UsageError

__all__ = ["REQUIRED", "SHARES", "PRIOSINK", "load_result", "result_kind",
           "check_result", "interval_mbps", "pcps", "plot_result"]

REQUIRED = ("rate_bps", "expected", "intervals")
SHARES, PRIOSINK = "shares", "priosink"
# The keys that say which kind a result is: any of the first, a shares
# result (its "flows" are the senders'); else the second, priosink -j.
_SHARES_KEYS = ("rate_bps", "expected")
_PRIOSINK_KEY = "flows"
# priosink's option for "intervals", as its usage text spells it.
_INTERVAL_OPTION = "--interval MS"
_PCPS = 8
_SIZE_IN = (11, 6)
_DPI = 100


def load_result(path):
    """The result in the JSON file PATH, checked (check_result): a shares
    result or priosink -j output; a one-line UsageError for a missing or
    unreadable file or one that is neither."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, not a result file") \
            from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not JSON (not UTF-8 text)") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror}") from None
    try:
        result = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: not JSON ({e.msg} at line {e.lineno} "
                         f"column {e.colno})") from None
    check_result(result, path)
    return result


def _bad(source, what):
    return UsageError(f"{source}: {what} (not a result of "
                      "SharesResult.as_json())")


def _bad_sink(source, what):
    return UsageError(f"{source}: {what} (not priosink -j output)")


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and \
        math.isfinite(x)


def result_kind(result, source="result"):
    """SHARES or PRIOSINK, from RESULT's keys; a UsageError naming SOURCE
    (a file name) and the keys it lacks when it is neither."""
    if not isinstance(result, dict):
        raise UsageError(f"{source}: a JSON {type(result).__name__}, not an "
                         "object (neither a result of SharesResult.as_json() "
                         "nor priosink -j output)")
    if any(key in result for key in _SHARES_KEYS):
        return SHARES
    if _PRIOSINK_KEY in result:
        return PRIOSINK
    raise UsageError(f"{source}: neither a result of SharesResult.as_json() "
                     f"(no key {' or '.join(map(_quoted, _SHARES_KEYS))}) "
                     f"nor priosink -j output (no key "
                     f"{_quoted(_PRIOSINK_KEY)})")


def _quoted(key):
    return f'"{key}"'


def check_result(result, source="result"):
    """RESULT's kind (result_kind); raise a UsageError naming the key when
    RESULT is not a result plot_result can draw; SOURCE (a file name)
    starts the message."""
    if result_kind(result, source) == PRIOSINK:
        _check_priosink(result, source)
        return PRIOSINK
    _check_shares(result, source)
    return SHARES


def _check_priosink(result, source):
    if not isinstance(result[_PRIOSINK_KEY], list):
        raise _bad_sink(source, f"{_quoted(_PRIOSINK_KEY)} is not a list")
    if "intervals" not in result:
        raise UsageError(f'{source}: priosink -j output without "intervals": '
                         f"run priosink with {_INTERVAL_OPTION} to have "
                         "its throughput over time")
    _check_intervals(result["intervals"], lambda what: _bad_sink(source,
                                                                 what))
    if not result["intervals"]:
        raise UsageError(f'{source}: "intervals" is empty: priosink counted '
                         "no priosend frame, there is nothing to draw")


def _check_shares(result, source):
    for key in REQUIRED:
        if key not in result:
            raise _bad(source, f'no key "{key}"')
    if not _number(result["rate_bps"]) or result["rate_bps"] <= 0:
        raise _bad(source, f'"rate_bps" is {result["rate_bps"]!r}, not a '
                           "positive number")
    expected = result["expected"]
    if not isinstance(expected, dict) or not expected:
        raise _bad(source, '"expected" is not an object {"pcp": share}')
    for pcp, share in expected.items():
        if not str(pcp).isdigit() or int(pcp) >= _PCPS or not _number(share):
            raise _bad(source, f'"expected": "{pcp}": {share!r} is not a '
                               "PCP 0-7 with a share")
    _check_intervals(result["intervals"], lambda what: _bad(source, what))
    steady = result.get("steady")
    if steady is not None and (not isinstance(steady, list) or
                               len(steady) != 2 or
                               not all(_number(x) for x in steady)):
        raise _bad(source, '"steady" is not [from_s, to_s]')
    if "rtt" in result:
        _check_rtt(result["rtt"], source)
    if "pause" in result:
        _check_pause(result["pause"], source)


def _check_intervals(intervals, bad):
    """priosink's "intervals", as both kinds carry them; BAD(what) makes
    the error."""
    if not isinstance(intervals, list):
        raise bad('"intervals" is not a list')
    for i, iv in enumerate(intervals):
        where = f'"intervals"[{i}]'
        if not isinstance(iv, dict):
            raise bad(f"{where} is not an object")
        for key in ("t_s", "len_s", "pcp_bytes"):
            if key not in iv:
                raise bad(f'{where}: no key "{key}"')
        if not _number(iv["t_s"]) or not _number(iv["len_s"]) or \
                iv["len_s"] <= 0:
            raise bad(f'{where}: "t_s" and "len_s" must be numbers, '
                      '"len_s" above 0')
        b = iv["pcp_bytes"]
        if not isinstance(b, list) or len(b) != _PCPS or \
                not all(_number(x) for x in b):
            raise bad(f'{where}: "pcp_bytes" is not 8 numbers')
        if not _number(iv.get("untagged_bytes", 0)):
            raise bad(f'{where}: "untagged_bytes" is not a number')


def _check_pause(pause, source):
    if not isinstance(pause, dict) or not isinstance(pause.get("ports"),
                                                      dict):
        raise _bad(source, '"pause" is not {"prios": [...], "ports": '
                           '{port: [[t_s, fraction], ...]}}')
    prios = pause.get("prios")
    if not isinstance(prios, list) or not all(
            isinstance(p, int) and 0 <= p < _PCPS for p in prios):
        raise _bad(source, '"pause": "prios" is not a list of 0-7')
    for port, series in pause["ports"].items():
        if not isinstance(series, list) or not all(
                isinstance(s, list) and len(s) == 2 and _number(s[0]) and
                _number(s[1]) and 0 <= s[1] <= 1 for s in series):
            raise _bad(source, f'"pause": "{port}" is not a list of '
                               "[t_s, fraction 0-1]")


def _check_rtt(rtt, source):
    if not isinstance(rtt, list):
        raise _bad(source, '"rtt" is not a list of probes')
    for i, probe in enumerate(rtt):
        where = f'"rtt"[{i}]'
        if not isinstance(probe, dict):
            raise _bad(source, f"{where} is not an object")
        for key in ("name", "pcp", "idle_ms", "load"):
            if key not in probe:
                raise _bad(source, f'{where}: no key "{key}"')
        if not isinstance(probe["pcp"], int) or \
                not 0 <= probe["pcp"] < _PCPS:
            raise _bad(source, f'{where}: "pcp" is {probe["pcp"]!r}, not '
                               "0-7")
        if not isinstance(probe["idle_ms"], list) or \
                not all(x is None or _number(x) for x in probe["idle_ms"]):
            raise _bad(source, f'{where}: "idle_ms" is not a list of '
                               "rtt_ms or null")
        load = probe["load"]
        if not isinstance(load, list) or not all(
                isinstance(s, list) and len(s) == 2 and _number(s[0]) and
                (s[1] is None or _number(s[1])) for s in load):
            raise _bad(source, f'{where}: "load" is not a list of '
                               "[t_s, rtt_ms or null]")


def interval_mbps(iv, pcp):
    """PCP's throughput in interval IV, Mbit/s."""
    return iv["pcp_bytes"][pcp] * 8 / iv["len_s"] / 1e6


def _rate(bps):
    if bps >= 1e9:
        return f"{bps / 1e9:g} Gbit/s"
    return f"{bps / 1e6:g} Mbit/s"


def pcps(result):
    """The PCPs drawn, as sorted numbers: those a shares result expects
    shares for; those that carried a byte in some interval of priosink's."""
    if result_kind(result) == PRIOSINK:
        return [p for p in range(_PCPS)
                if any(iv["pcp_bytes"][p] for iv in result["intervals"])]
    return list(_shares(result))


def _total_mbps(iv):
    """Everything priosink counted in interval IV, tagged or not, Mbit/s."""
    return (sum(iv["pcp_bytes"]) + iv.get("untagged_bytes", 0)) \
        * 8 / iv["len_s"] / 1e6


def _shares(result):
    """{pcp: share}, PCPs as numbers (JSON has them as strings), sorted."""
    return dict(sorted((int(p), s) for p, s in result["expected"].items()))


def _matplotlib():
    # matplotlib keeps a font cache (and looks for its config) under the
    # user's home, ~/.cache/matplotlib and ~/.config/matplotlib, and
    # creates them on first use: in the build directory instead, unless
    # the user named one.
    if "MPLCONFIGDIR" not in os.environ:
        where = paths.build_dir() / "matplotlib"
        where.mkdir(parents=True, exist_ok=True)
        os.environ["MPLCONFIGDIR"] = str(where)
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
        from matplotlib import ticker
    except ImportError as e:
        raise DcblabError(f"plot needs matplotlib ({e}): install the Debian "
                          "package python3-matplotlib") from None
    return SimpleNamespace(FigureCanvasAgg=FigureCanvasAgg, Figure=Figure,
                           Line2D=Line2D, Patch=Patch, ticker=ticker)


def _throughput(ax, result, mpl):
    ivs = result["intervals"]
    rate = result["rate_bps"]
    t = [iv["t_s"] + iv["len_s"] / 2 for iv in ivs]
    steady = result.get("steady")
    if steady:
        ax.axvspan(*steady, color="0.9", zorder=0)
    handles = []
    for pcp, share in _shares(result).items():
        colour = f"C{pcp}"
        handles += ax.plot(t, [interval_mbps(iv, pcp) for iv in ivs],
                           color=colour, lw=1.6, gid=f"pcp-{pcp}",
                           label=f"PCP {pcp} ({share * 100:.3g} %)")
        ax.axhline(share * rate / 1e6, color=colour, ls="--", lw=1,
                   gid=f"expected-{pcp}",
                   label=f"_expected PCP {pcp}")
    total = [_total_mbps(iv) for iv in ivs]
    handles += ax.plot(t, total, color="black", lw=0.8, gid="total",
                       label="total received")
    handles.append(ax.axhline(rate / 1e6, color="black", ls=":", lw=1,
                              gid="rate", label=f"port rate {_rate(rate)}"))
    handles.append(mpl.Line2D([], [], color="0.4", ls="--", lw=1,
                              label=f"expected: share × {_rate(rate)}"))
    if steady:
        handles.append(mpl.Patch(color="0.9", label=f"steady {steady[0]:g}–"
                                                    f"{steady[1]:g} s"))
    top = max([rate / 1e6] + total)
    ax.set_ylim(0, top * 1.1)
    ax.set_ylabel("throughput at the receiver (Mbit/s)")
    ax.set_title(f"ETS shares at a {_rate(rate)} port")
    ax.grid(True, color="0.85", lw=0.5)
    _legend(ax, handles=handles)


def _sink_throughput(ax, result, mpl):
    """priosink -j --interval: each PCP it counted bytes of, untagged
    frames if it had any, and the total; no reference lines (priosink
    knows no port rate or shares)."""
    ivs = result["intervals"]
    t = [iv["t_s"] + iv["len_s"] / 2 for iv in ivs]
    for pcp in pcps(result):
        ax.plot(t, [interval_mbps(iv, pcp) for iv in ivs], color=f"C{pcp}",
                lw=1.6, gid=f"pcp-{pcp}", label=f"PCP {pcp}")
    if any(iv.get("untagged_bytes", 0) for iv in ivs):
        ax.plot(t, [iv.get("untagged_bytes", 0) * 8 / iv["len_s"] / 1e6
                    for iv in ivs], color="0.5", lw=1.2, ls="-.",
                gid="untagged", label="untagged")
    total = [_total_mbps(iv) for iv in ivs]
    ax.plot(t, total, color="black", lw=0.8, gid="total",
            label="total received")
    ax.set_ylim(0, (max(total) or 1) * 1.1)
    ax.set_ylabel("throughput at the receiver (Mbit/s)")
    iface = f" on {result['interface']}" if "interface" in result else ""
    ax.set_title(f"priosink{iface}: throughput per PCP, "
                 f"{ivs[0]['len_s'] * 1000:g} ms intervals")
    ax.grid(True, color="0.85", lw=0.5)
    _legend(ax)


def _legend(ax, **kw):
    """Right of the axes: no data of any run hides behind it."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0,
              fontsize="small", **kw)


def _probe_colours(rtt):
    used, out = set(), []
    for probe in rtt:
        c = probe["pcp"]
        while c in used:
            c += 1
        used.add(c)
        out.append(f"C{c % 10}")
    return out


def _rtt(ax, result, mpl):
    rtt = result["rtt"]
    probes = []
    for probe, colour in zip(rtt, _probe_colours(rtt)):
        idle_ms = [ms for ms in probe["idle_ms"] if ms is not None]
        idle = statistics.median(idle_ms) if idle_ms else None
        probes.append((probe, colour, idle,
                       [(t, ms) for t, ms in probe["load"] if ms is not None],
                       [t for t, ms in probe["load"] if ms is None]))
    seen = [ms for _, _, idle, got, _ in probes
            for ms in [m for _, m in got] + ([idle] if idle is not None
                                              else [])]
    # The lost marks go above the highest RTT, with room to spare.
    if seen and min(seen) > 0 and max(seen) / min(seen) > 20:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(
            mpl.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(
            mpl.ticker.FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(mpl.ticker.NullFormatter())
        ax.set_ylim(min(seen) / 1.5, max(seen) * 3)
        lost_y = max(seen) * 1.8
        ax.set_ylabel("RTT (ms, log scale)")
    else:
        top = max(seen, default=0) or 1
        ax.set_ylim(0, top * 1.3)
        lost_y = top * 1.17
        ax.set_ylabel("RTT (ms)")
    steady = result.get("steady")
    if steady:
        ax.axvspan(*steady, color="0.9", zorder=0)
    for probe, colour, idle, got, lost in probes:
        name = probe["name"]
        error = f": {probe['error']}"[:60] if probe.get("error") else ""
        ax.plot([t for t, _ in got], [ms for _, ms in got], color=colour,
                lw=0.8, marker=".", ms=3, gid=f"rtt-{name}",
                label=f"{name} (PCP {probe['pcp']}){error}")
        if lost:
            ax.plot(lost, [lost_y] * len(lost), ls="none", marker="x",
                    color=colour, gid=f"lost-{name}",
                    label=f"{name}: {len(lost)} lost")
        if idle is not None:
            ax.axhline(idle, color=colour, ls="--", lw=1, gid=f"idle-{name}",
                       label=f"{name} idle median {idle:.3g} ms")
    ax.set_title("RTT probes through the congested port (x: lost)",
                 fontsize="medium")
    ax.grid(True, color="0.85", lw=0.5)
    if rtt:
        _legend(ax)


def _pause(ax, result, mpl):
    pause = result["pause"]
    steady = result.get("steady")
    if steady:
        ax.axvspan(*steady, color="0.9", zorder=0)
    prios = ",".join(map(str, pause["prios"]))
    partners = pause.get("partners") or {}
    # Senders under one congestion are paused alike: their lines lie on
    # each other, told apart by their dashes.
    for i, (port, series) in enumerate(sorted(pause["ports"].items())):
        to = f" -> {partners[port]}" if port in partners else ""
        ax.step([t for t, _ in series], [f * 100 for _, f in series],
                where="mid", color=f"C{i + 4}", lw=2.4 - 0.6 * (i % 3),
                ls=("-", "--", ":")[i % 3], gid=f"pause-{port}",
                label=f"{port}{to} paused")
    ax.set_ylim(0, 105)
    ax.set_ylabel("time paused (%)")
    ax.set_title(f"PFC: share of time the switch kept each sender paused "
                 f"for priority {prios}", fontsize="medium")
    ax.grid(True, color="0.85", lw=0.5)
    if pause["ports"]:
        _legend(ax)


def plot_result(result, out_path):
    """Draw RESULT (a dict as SharesResult.as_json() gives it, maybe with
    an "rtt" section, or priosink -j output with "intervals") and write it
    to OUT_PATH as PNG; returns the matplotlib Figure (its axes: the
    throughput, then, if a shares result has them, the RTT and the time
    the switch kept each sender paused)."""
    kind = check_result(result)
    out = Path(out_path)
    if out.suffix.lower() != ".png":
        raise UsageError(f"{out}: the output is a PNG: name it *.png")
    if not out.parent.is_dir():
        raise UsageError(f"{out}: directory {out.parent} does not exist")
    mpl = _matplotlib()
    if kind == PRIOSINK:
        panels = [(_sink_throughput, 3)]
    else:
        panels = [(_throughput, 3)] + \
            ([(_rtt, 2)] if "rtt" in result else []) + \
            ([(_pause, 1.5)] if "pause" in result else [])
    w, h = _SIZE_IN
    fig = mpl.Figure(figsize=(w, h + 2 * (len(panels) - 1)), dpi=_DPI)
    mpl.FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": [r for _, r in
                                                       panels]})[:, 0]
    for ax, (draw, _) in zip(axes, panels):
        draw(ax, result, mpl)
    axes[-1].set_xlabel("time since priosink started (s)"
                        if kind == PRIOSINK else "time (s)")
    fig.tight_layout()
    try:
        fig.savefig(out, format="png", dpi=_DPI)
    except OSError as e:
        raise DcblabError(f"{out}: cannot write: {e.strerror or e}") \
            from None
    return fig
