"""`dcblab plot`: a fabric shares result (tests/data/fabric-shares.json, a
real run's SharesResult.as_json()) and priosink -j --interval output
(tests/data/priosink-intervals.json, a real run on two-hosts' h2: flows at
PCP 1, 3 and 5 from h1, started and ended at different times) drawn as a
PNG. Host only: no lab."""

import copy
import json
import os
import re
import statistics
import subprocess
import sys

import pytest

from dcblab.core.errors import DcblabError, UsageError
from dcblab.core.paths import ROOT, build_dir
from dcblab.scenarios.plot import plot_result
from dcblab.testing.sandbox import Sandbox

pytest.importorskip("matplotlib", reason="needs python3-matplotlib")

SAMPLE = ROOT / "tests" / "data" / "fabric-shares.json"
SINK_SAMPLE = ROOT / "tests" / "data" / "priosink-intervals.json"
PRIOSINK_C = ROOT / "tools" / "priosink.c"
DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def sample():
    return json.loads(SAMPLE.read_text())


@pytest.fixture
def sink_sample():
    return json.loads(SINK_SAMPLE.read_text())


def _sink_pcps(result):
    """The PCPs priosink counted a byte of in some interval."""
    return [p for p in range(8)
            if any(iv["pcp_bytes"][p] for iv in result["intervals"])]


def _interval_option():
    """priosink's interval option as its usage text spells it."""
    m = re.search(r'^"\s+(--interval \S+)', PRIOSINK_C.read_text(), re.M)
    assert m, f"{PRIOSINK_C}: no --interval in the usage text"
    return m.group(1)


def _expected_pcps(result):
    return sorted(int(p) for p in result["expected"])


def _by_gid(ax, gid):
    lines = [ln for ln in ax.lines if ln.get_gid() == gid]
    assert len(lines) == 1, [ln.get_gid() for ln in ax.lines]
    return lines[0]


def _with_rtt(result, queued_ms=40.0):
    """The sample plus two synthetic probes on its time axis: a strict one
    that stays near its idle RTT and a best-effort one that queues
    (queued_ms and growing) and loses every fifth probe; one idle probe
    of each was lost too."""
    r = copy.deepcopy(result)
    ts = [iv["t_s"] + iv["len_s"] / 2 for iv in r["intervals"]]
    r["rtt"] = [
        {"name": "strict", "pcp": 7, "idle_ms": [0.31, None, 0.29, 0.35],
         "load": [[t, 0.4 + 0.01 * (i % 3)] for i, t in enumerate(ts)],
         "error": None},
        {"name": "best-effort", "pcp": 1, "idle_ms": [0.3, 0.33, None],
         "load": [[t, None if i % 5 == 4 else queued_ms * (1 + i / 40)]
                  for i, t in enumerate(ts)],
         "error": None},
    ]
    return r


def test_plot_writes_a_png(sample, tmp_path):
    out = tmp_path / "shares.png"
    plot_result(sample, out)
    assert out.read_bytes().startswith(PNG_SIGNATURE)


def test_throughput_lines_are_the_intervals_in_mbps(sample, tmp_path):
    ax = plot_result(sample, tmp_path / "s.png").axes[0]
    ivs = sample["intervals"]
    for pcp in _expected_pcps(sample):
        line = _by_gid(ax, f"pcp-{pcp}")
        share = sample["expected"][str(pcp)]
        assert line.get_label() == f"PCP {pcp} ({share * 100:.3g} %)"
        assert list(line.get_ydata()) == pytest.approx(
            [iv["pcp_bytes"][pcp] * 8 / iv["len_s"] / 1e6 for iv in ivs])
    pcp_lines = [ln for ln in ax.lines
                 if (ln.get_gid() or "").startswith("pcp-")]
    assert len(pcp_lines) == len(sample["expected"])


def test_reference_lines_are_expected_share_times_rate(sample, tmp_path):
    ax = plot_result(sample, tmp_path / "s.png").axes[0]
    for pcp in _expected_pcps(sample):
        ref = _by_gid(ax, f"expected-{pcp}")
        want = sample["expected"][str(pcp)] * sample["rate_bps"] / 1e6
        assert list(ref.get_ydata()) == pytest.approx([want, want])
        assert ref.get_linestyle() == "--"
        assert ref.get_color() == _by_gid(ax, f"pcp-{pcp}").get_color()


def test_title_names_the_port_rate(sample, tmp_path):
    fig = plot_result(sample, tmp_path / "s.png")
    rate = sample["rate_bps"] / 1e6
    assert fig.axes[0].get_title() == f"ETS shares at a {rate:g} Mbit/s port"


def test_without_rtt_there_is_one_axes(sample, tmp_path):
    assert len(plot_result(sample, tmp_path / "s.png").axes) == 1


# 40 ms of queueing against 0.3 ms idle is drawn on a log scale, 0.5 ms
# on a linear one.
@pytest.mark.parametrize("queued_ms", [40.0, 0.5], ids=["log", "linear"])
def test_rtt_section_gives_a_second_axes_with_each_probe(sample, tmp_path,
                                                         queued_ms):
    result = _with_rtt(sample, queued_ms)
    out = tmp_path / "rtt.png"
    fig = plot_result(result, out)
    assert out.read_bytes().startswith(PNG_SIGNATURE)
    assert len(fig.axes) == 2
    ax = fig.axes[1]
    for probe in result["rtt"]:
        got = [ms for _, ms in probe["load"] if ms is not None]
        lost = [t for t, ms in probe["load"] if ms is None]
        line = _by_gid(ax, f"rtt-{probe['name']}")
        assert list(line.get_ydata()) == got
        idle = _by_gid(ax, f"idle-{probe['name']}")
        idle_ms = [ms for ms in probe["idle_ms"] if ms is not None]
        assert list(idle.get_ydata()) == pytest.approx(
            [statistics.median(idle_ms)] * 2)
        assert idle.get_linestyle() == "--"
        if lost:
            marks = _by_gid(ax, f"lost-{probe['name']}")
            assert list(marks.get_xdata()) == lost
            # drawn inside the panel, above every RTT measured
            low, high = ax.get_ylim()
            assert all(max(got) < y < high for y in marks.get_ydata())
        else:
            assert not any(ln.get_gid() == f"lost-{probe['name']}"
                           for ln in ax.lines)


def _with_pause(result):
    """The sample plus what the switch's pfcd said: swp1 kept its partner
    paused 0 %, then 60 %, then 100 % of the time; swp2 never."""
    r = copy.deepcopy(result)
    ts = [iv["t_s"] + iv["len_s"] / 2 for iv in r["intervals"]]
    r["pause"] = {"prios": [3], "ports": {
        "swp1": [[t, [0.0, 0.6, 1.0][min(i, 2)]] for i, t in enumerate(ts)],
        "swp2": [[t, 0.0] for t in ts]}}
    return r


def test_pause_section_gives_a_panel_of_time_paused_per_port(sample,
                                                             tmp_path):
    """With RTT and pause sections: three panels, the last the time each
    switch port kept its partner paused, in percent of each stretch."""
    result = _with_pause(_with_rtt(sample))
    fig = plot_result(result, tmp_path / "p.png")
    assert len(fig.axes) == 3
    ax = fig.axes[2]
    for port, series in result["pause"]["ports"].items():
        line = _by_gid(ax, f"pause-{port}")
        assert list(line.get_ydata()) == pytest.approx(
            [f * 100 for _, f in series])
        assert list(line.get_xdata()) == [t for t, _ in series]
    assert "priority 3" in ax.get_title()
    assert len(plot_result(_with_pause(sample), tmp_path / "q.png").axes) \
        == 2


def test_a_pause_fraction_above_1_is_refused(sample, tmp_path):
    result = _with_pause(sample)
    result["pause"]["ports"]["swp1"][0][1] = 1.5
    with pytest.raises(UsageError, match='"pause": "swp1" is not'):
        plot_result(result, tmp_path / "s.png")


def test_missing_key_names_it(sample, tmp_path):
    del sample["expected"]
    with pytest.raises(UsageError, match='no key "expected"'):
        plot_result(sample, tmp_path / "s.png")
    assert not (tmp_path / "s.png").exists()


def test_priosink_output_is_drawn_per_pcp_in_mbps(sink_sample, tmp_path):
    out = tmp_path / "sink.png"
    fig = plot_result(sink_sample, out)
    assert out.read_bytes().startswith(PNG_SIGNATURE)
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    ivs = sink_sample["intervals"]
    pcps = _sink_pcps(sink_sample)
    assert len(pcps) > 1
    for pcp in pcps:
        line = _by_gid(ax, f"pcp-{pcp}")
        assert line.get_label() == f"PCP {pcp}"
        assert list(line.get_xdata()) == pytest.approx(
            [iv["t_s"] + iv["len_s"] / 2 for iv in ivs])
        assert list(line.get_ydata()) == pytest.approx(
            [iv["pcp_bytes"][pcp] * 8 / iv["len_s"] / 1e6 for iv in ivs])
    pcp_lines = [ln for ln in ax.lines
                 if (ln.get_gid() or "").startswith("pcp-")]
    assert len(pcp_lines) == len(pcps)
    assert list(_by_gid(ax, "total").get_ydata()) == pytest.approx(
        [(sum(iv["pcp_bytes"]) + iv["untagged_bytes"]) * 8 / iv["len_s"]
         / 1e6 for iv in ivs])


def test_priosink_output_without_intervals_names_the_interval_option(
        sink_sample, tmp_path):
    """priosink prints "intervals" only when run with its interval
    option: the error says to, spelled as priosink's usage spells it."""
    del sink_sample["intervals"]
    with pytest.raises(UsageError) as e:
        plot_result(sink_sample, tmp_path / "s.png")
    assert f"run priosink with {_interval_option()}" in str(e.value)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "s.png").exists()


def test_priosink_output_with_no_interval_is_refused(sink_sample, tmp_path):
    sink_sample["intervals"] = []
    with pytest.raises(UsageError, match='"intervals" is empty'):
        plot_result(sink_sample, tmp_path / "s.png")
    assert not (tmp_path / "s.png").exists()


def test_unknown_format_names_the_keys_of_both_kinds(sink_sample, tmp_path):
    del sink_sample["flows"]
    with pytest.raises(UsageError) as e:
        plot_result(sink_sample, tmp_path / "s.png")
    msg = str(e.value)
    assert "neither a result of SharesResult.as_json()" in msg
    assert 'no key "rate_bps" or "expected"' in msg
    assert 'nor priosink -j output (no key "flows")' in msg
    assert "\n" not in msg
    assert not (tmp_path / "s.png").exists()


def test_missing_matplotlib_names_the_debian_package(sample, tmp_path,
                                                     monkeypatch):
    for name in [m for m in sys.modules if m.split(".")[0] == "matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(DcblabError, match="python3-matplotlib") as e:
        plot_result(sample, tmp_path / "s.png")
    assert "\n" not in str(e.value)


# --- the command line --------------------------------------------------------

def _dcblab(args):
    return subprocess.run(DCBLAB + args, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("path,pcps", [(SAMPLE, _expected_pcps),
                                        (SINK_SAMPLE, _sink_pcps)],
                         ids=["shares", "priosink"])
def test_cli_writes_the_png_and_says_so(tmp_path, path, pcps):
    data = json.loads(path.read_text())
    out = tmp_path / "out.png"
    r = _dcblab(["plot", str(path), "-o", str(out)])
    assert r.returncode == 0, r.stderr
    shown = ", ".join(map(str, pcps(data)))
    assert r.stdout == (f"dcblab plot: wrote {out} "
                        f"({len(data['intervals'])} intervals, PCPs "
                        f"{shown})\n")
    assert out.read_bytes().startswith(PNG_SIGNATURE)


def _without(key, sample=SAMPLE):
    def make(path):
        result = json.loads(sample.read_text())
        del result[key]
        path.write_text(json.dumps(result))
    return make


@pytest.mark.parametrize("make_input, output, text", [
    (None, "out.png", "nosuch.json: no such file"),
    (lambda p: p.write_text("{\"rate_bps\": 1e7,"), "out.png",
     "in.json: not JSON ("),
    (_without("intervals"), "out.png", 'in.json: no key "intervals"'),
    (_without("rate_bps"), "out.png", 'in.json: no key "rate_bps"'),
    (_without("expected"), "out.png", 'in.json: no key "expected"'),
    (lambda p: p.write_text("[]"), "out.png", "in.json: a JSON list"),
    (_without("intervals", SINK_SAMPLE), "out.png",
     'in.json: priosink -j output without "intervals": run priosink with '
     "--interval MS"),
    (_without("flows", SINK_SAMPLE), "out.png",
     'in.json: neither a result of SharesResult.as_json()'),
    (lambda p: p.write_text(SAMPLE.read_text()), "nodir/out.png",
     "nodir does not exist"),
    (lambda p: p.write_text(SAMPLE.read_text()), "out.svg",
     "the output is a PNG"),
], ids=["file-missing", "not-json", "no-intervals", "no-rate", "no-expected",
        "not-an-object", "priosink-no-intervals", "unknown-format",
        "output-dir-missing", "not-png"])
def test_cli_mistake_is_one_line(tmp_path, make_input, output, text):
    src = tmp_path / ("in.json" if make_input else "nosuch.json")
    if make_input:
        make_input(src)
    r = _dcblab(["plot", str(src), "-o", str(tmp_path / output)])
    assert r.returncode == 2, r
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("dcblab: ") and r.stderr.count("\n") == 1, \
        r.stderr
    assert text in r.stderr
    assert r.stdout == ""
    assert not (tmp_path / output).exists()


def test_plot_leaves_nothing_in_the_users_home():
    """matplotlib's font cache and config go to the build directory, not
    ~/.cache/matplotlib and ~/.config/matplotlib (seen on a fresh
    machine): run in a sandbox where any write outside the build
    directory shows, with no MPLCONFIGDIR of the user's."""
    out = build_dir() / "plot-in-sandbox.png"
    env = {k: v for k, v in os.environ.items() if k != "MPLCONFIGDIR"}
    with Sandbox() as sb:
        # The user's home as on a machine that never ran matplotlib.
        r = sb.run(["sh", "-c", "rm -rf ~/.cache/matplotlib "
                    "~/.config/matplotlib"])
        assert r.returncode == 0, r.stderr
        before = sb.writes()
        r = sb.run(DCBLAB + ["plot", str(SAMPLE), "-o", str(out)], env=env,
                   cwd=ROOT)
        assert r.returncode == 0, r.stderr
        assert sb.writes() == before
    out.unlink()
