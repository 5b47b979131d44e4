"""`dcblab top` on the fabric lab (topology/dcb-fabric.toml) as a user
runs it: its JSON sees a stream where it flows (h1's TX, sw's ingress
PCP counter on swp1, the ETS band of its class on swp3) at the rate that
was sent, and h1's DCBX state; its screen works in a terminal and 'q'
quits; an unknown machine is a one-line mistake."""

import json
import os
import shlex
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from dcblab.core.paths import ROOT
from dcblab.lab.top import STATS, Top
from dcblab.testing.dcb import ets_of, wait_for
from dcblab.topology import load

DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]
PCP = 3
RATE = 300          # frames/s from h1, well under swp3's 10 Mbit/s
SIZE = 1400
INTERVALS = 3


def _top(fabric, *args, timeout=60):
    return subprocess.run(DCBLAB + ["top", "--name", fabric.name, *args],
                          capture_output=True, text=True, timeout=timeout)


def _ports(report):
    return {(m["name"], p["dev"]): p for m in report["machines"]
            for p in m["ports"]}


def _port_dcb(fabric, host):
    sw, port = fabric.topology.host(host).nics[0].peer.split(":")
    return fabric.topology.host(sw).nic(port).dcb


def test_top_json_shows_a_stream_per_class_and_dcbx_adoption(fabric):
    """h1 sends at PCP 3 while top samples 3 intervals: sw counts PCP 3
    arriving on swp1 and sends it in the band of PCP 3's TC on swp3, h1's
    eth0 sends it in that TC, each at about the rate priosend achieved;
    h1 is willing and holds swp1's ETS, sw's ports are unwilling."""
    d = _port_dcb(fabric, "h1")
    # DCBX hands h1 swp1's ETS a few seconds after `up`; top reports it.
    wait_for("h1 to hold swp1's ETS", lambda: ets_of(fabric.h1),
             lambda e: e == dict(prio_tc=d.prio_tc, tsa=d.tsa, bw=d.bw))
    dst = fabric.topology.address("h3", vlan=100)
    fabric.h1.run(["ping", "-c", "1", "-W", "2", dst])
    # Sends for longer than top runs (a first sample, then 3 intervals).
    sender = fabric.h1.spawn(["priosend", "-j", "--rate", str(RATE),
                              "--count", str(RATE * 12), "--size", str(SIZE),
                              "--so-priority", str(PCP), dst])
    try:
        r = _top(fabric, "-j", "--count", str(INTERVALS), "--interval", "1")
    finally:
        sent = json.loads(fabric.h1.wait(sender, timeout=60).stdout)
    assert r.returncode == 0, r.stderr
    reports = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(reports) == INTERVALS
    tc = d.prio_tc[PCP]
    seen = {"h1 tx": [], "swp1 rx": [], "swp3 tx": []}
    for rep in reports:
        assert rep["lab"] == fabric.name and rep["dcbx"] is True
        ports = _ports(rep)
        h1, swp1, swp3 = (ports["h1", "eth0"], ports["sw", "swp1"],
                          ports["sw", "swp3"])
        seen["h1 tx"].append(next(e for e in h1["tx"] if e["tc"] == tc))
        seen["swp1 rx"].append(next(e for e in swp1["rx_pcp"]
                                    if e["pcp"] == PCP))
        seen["swp3 tx"].append(next(e for e in swp3["tx"] if e["tc"] == tc))
        # h1 holds the ETS swp1 runs, which is the file's
        assert h1["dcbx"] == {"willing": True, "adopted": True,
                              "against": "port"}
        assert swp1["dcbx"]["willing"] is False
        assert swp1["dcb"]["same"] is True
        assert swp1["dcb"]["port"]["tc_bw"] == list(d.bw)
    print(f"priosend: {sent['pps']:.0f} frames/s; top, frames/s per "
          "interval: " + "; ".join(
              f"{k} {[e['pps'] for e in v]}" for k, v in seen.items()))
    for where, entries in seen.items():
        assert all(e["pps"] > 0 and e["bps"] > 0 for e in entries), \
            (where, entries)
        # Loosely: a 1 s interval under TCG sees bursts, the mean is close.
        mean = sum(e["pps"] for e in entries) / len(entries)
        assert 0.5 * sent["pps"] <= mean <= 1.5 * sent["pps"], (where, mean)
        # Each frame carries SIZE bytes of payload, and headers on top.
        assert all(e["bps"] >= e["pps"] * SIZE * 8 for e in entries), \
            (where, entries)


def _tmux(sock, *args):
    # -S: the server's socket in the test's own directory, not
    # /tmp/tmux-UID/, where -L would leave it after kill-server.
    return subprocess.run(["tmux", "-S", str(sock), "-f", "/dev/null",
                           *args], capture_output=True, text=True, timeout=30)


def test_top_screen_shows_every_port_and_q_quits(fabric, tmp_path):
    """In a terminal (tmux) top draws the table: a row for every machine's
    port; 'q' ends it, exit 0."""
    if not os.path.exists("/usr/bin/tmux"):
        pytest.skip("tmux is not installed (apt-get install tmux)")
    sock = tmp_path / "tmux.sock"
    rc_file = tmp_path / "rc"
    cmd = (shlex.join(DCBLAB + ["top", "--name", fabric.name]) +
           f"; echo $? > {shlex.quote(str(rc_file))}")
    names = [f"{h.name} {n.name}" for h in fabric.topology.hosts
             for n in h.nics]
    try:
        r = _tmux(sock, "new-session", "-d", "-x", "100", "-y", "40", cmd)
        assert r.returncode == 0, r.stderr
        screen, _ = wait_for(
            "top's table in the tmux pane",
            lambda: _tmux(sock, "capture-pane", "-p").stdout,
            lambda text: all(n in text for n in names), timeout=30)
        assert f"dcblab top: lab {fabric.name}, every 1 s" in screen
        _tmux(sock, "send-keys", "q")
        rc, _ = wait_for("top to exit after q",
                         lambda: rc_file.exists() and rc_file.read_text(),
                         lambda text: text, timeout=30)
        assert rc.strip() == "0"
    finally:
        _tmux(sock, "kill-server")


def test_unknown_machine_is_one_line_exit_2_naming_the_known(fabric):
    r = _top(fabric, "--count", "1", "h9")
    known = ", ".join(h.name for h in fabric.topology.hosts)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith("dcblab: ") and r.stderr.count("\n") == 1
    assert f'unknown host "h9" (hosts: {known})' in r.stderr
    assert r.stdout == ""


class _FakeGuest:
    """Answers top's script with the next of its canned outputs."""

    def __init__(self, outputs):
        self.outputs = iter(outputs)

    def run(self, argv, **kw):
        return SimpleNamespace(rc=0, stdout=next(self.outputs), stderr="")


def _host_output(q0, q1):
    stats = "\n".join(f"{k} 0" for k in STATS)
    queues = "".join(f"     tx_queue_{q}_packets: {n}\n"
                     f"     tx_queue_{q}_bytes: {n * 100}\n"
                     for q, n in enumerate((q0, q1)))
    return (f"@@ stat eth0\n{stats}\n@@ queues eth0\n0 \n1 \n"
            f"@@ ethtool eth0\nNIC statistics:\n{queues}"
            "@@ willing eth0\nwilling=yes\n")


def test_every_queue_is_tc_0_on_a_nic_without_traffic_classes():
    """With no TCs set, the driver's queues have no traffic_class (the
    read prints nothing): all they send is TC 0. Needs no lab."""
    topo = load(ROOT / "topology" / "two-hosts.toml")
    sent = (30, 12)   # frames from queues 0 and 1 between the samples
    top = Top("fake", topo, {"h1": _FakeGuest([_host_output(5, 7),
                                               _host_output(5 + sent[0],
                                                            7 + sent[1])])},
              ["h1"])
    try:
        before = top.sample()
        time.sleep(0.2)   # the interval: rates are over the host's time
        rep = top.report(before, top.sample(), 0.2)
    finally:
        top.close()
    (m,) = rep["machines"]
    (tc0,) = m["ports"][0]["tx"]
    assert tc0["tc"] == 0
    assert tc0["pps"] * m["seconds"] == pytest.approx(sum(sent), rel=0.01)
    assert tc0["bps"] == pytest.approx(tc0["pps"] * 100 * 8, rel=0.01)
    assert m["ports"][0]["dcbx"] == {"willing": True, "adopted": None,
                                     "against": None}
