"""virtio_net's PFC (kernel-patches/0005), on the two-host lab: h2 sends
802.1Qbb frames to h1 by hand (pfcsend), and h1's own qdiscs show what
its paused TX queues hold back. h1 partitions its 8 TX queues by an ETS
map (priority 3 in TC 2) with PFC on priority 3, its link at 100 Mbit/s
(one XOFF of 65535 quanta: 335 ms), or 10 Mbit/s where a single pause
must outlast the test's steps (3.36 s). lldpad is stopped in both guests
for this module (tests/test_dcb_driver.py says why). Runs in the debug
kernel's pass too (.ci/run). docs/pfc.md explains the data path."""

import contextlib
import json
import time

import pytest

from dcblab.scenarios.pfc import pfc_counters
from dcblab.testing.dcb import lldpad_stopped, wait_for
from dcblab.testing.traffic import Sink, pcp_counts, send

PRIO_TC = "0:0 1:0 2:1 3:2 4:0 5:3 6:0 7:0"
TSA = "0:ets 1:ets 2:ets 3:strict 4:strict 5:strict 6:strict 7:strict"
BW = "0:20 1:30 2:50 3:0 4:0 5:0 6:0 7:0"


def _speed(g, mbps):
    g.run(["ethtool", "-s", "eth0", "speed", str(mbps), "duplex", "full"])


@pytest.fixture(scope="module", autouse=True)
def _without_lldpad(request, dcblab_labs):
    lab = dcblab_labs.for_node(request.node)
    with lldpad_stopped([lab.h1, lab.h2]):
        yield


@pytest.fixture(autouse=True)
def _pfc_on_h1(lab, _without_lldpad):
    """h1: the ETS map and PFC on 3, its link at 100 Mbit/s, for each
    test (the restore after each puts back the driver's DCB defaults and
    the topology's link speed)."""
    lab.h1.run(["dcb", "ets", "set", "dev", "eth0", "prio-tc",
                *PRIO_TC.split(), "tc-tsa", *TSA.split(), "tc-bw",
                *BW.split()])
    lab.h1.run(["dcb", "pfc", "set", "dev", "eth0", "prio-pfc", "3:on"])
    _speed(lab.h1, 100)


@pytest.fixture()
def dst(lab):
    return lab.topology.address("h2", vlan=100)


def held(g, dev="eth0"):
    """Frames g's qdiscs on dev hold (the mq root's backlog): what its
    stopped TX queues keep back."""
    out = json.loads(g.run(["tc", "-s", "-j", "qdisc", "show", "dev",
                            dev]).stdout)
    return next(q["qlen"] for q in out if q.get("root"))


def indications(g, prio):
    return pfc_counters(g, "eth0")["indications"][prio]


def _pause(lab, *args, count=1, interval=0.02):
    """pfcsend on h2 toward h1, spawned; returns the Spawned."""
    return lab.h2.spawn(["pfcsend", "-j", "-I", "eth0", "-c", str(count),
                         "-i", str(interval), *args])


def _paused(lab, prio, before):
    wait_for(f"h1's indications for priority {prio} above {before}",
             lambda: indications(lab.h1, prio),
             lambda n: n > before, timeout=10)


def test_pfc_joins_the_pfc_address_and_leaves_it(lab):
    """With PFC on, h1 joined 01:80:c2:00:00:01 (its device's RX filter
    passes a multicast address only then); with PFC off it left it;
    pfc_cap is 8."""
    def joined():
        return "01:80:c2:00:00:01" in lab.h1.run(
            ["ip", "maddr", "show", "dev", "eth0"]).stdout
    assert joined()
    assert json.loads(lab.h1.run(["dcb", "-j", "pfc", "show", "dev",
                                  "eth0"]).stdout)["pfc_cap"] == 8
    lab.h1.run(["dcb", "pfc", "set", "dev", "eth0", "prio-pfc", "3:off"])
    try:
        assert not joined()
    finally:
        lab.h1.run(["dcb", "pfc", "set", "dev", "eth0", "prio-pfc", "3:on"])
    assert joined()


def test_xoff_holds_only_the_paused_priority_on_the_sender(lab, dst):
    """XOFF for priority 3 every 20 ms for 2 s: h1 keeps its priority-3
    frames in the qdiscs of their stopped queues, its priority-0 frames
    leave; when the pauses end the held frames go too. Pause frames are
    counted at both ends: h2's requests = h1's indications."""
    sink = Sink(lab.h2, "eth0", count=40, timeout=30)
    req0 = pfc_counters(lab.h2, "eth0")["requests"][3]
    ind0 = indications(lab.h1, 3)
    p = _pause(lab, "-p", "3", count=100)
    _paused(lab, 3, ind0)
    send(lab.h1, dst, count=20, rate=1000, flow=3, so_priority=3)
    send(lab.h1, dst, count=20, rate=1000, flow=0, so_priority=0)
    assert held(lab.h1) == 20
    out = json.loads(lab.h2.wait(p, timeout=30).stdout)
    assert out["sent"] == 100
    wait_for("h1's held frames sent", lambda: held(lab.h1),
             lambda n: n == 0, timeout=5)
    got = sink.result()
    assert {f["flow"]: pcp_counts(f) for f in got["flows"]} == \
        {3: {3: 20}, 0: {0: 20}}
    assert pfc_counters(lab.h2, "eth0")["requests"][3] - req0 == 100
    assert indications(lab.h1, 3) - ind0 == 100


@contextlib.contextmanager
def _one_long_pause(lab):
    """h1 at 10 Mbit/s, where one XOFF of 65535 quanta lasts 3.36 s, and
    paused by one; yields the host time it was seen paused. 100 Mbit/s
    again after."""
    g = lab.h1
    _speed(g, 10)
    try:
        ind0 = indications(g, 3)
        lab.h2.wait(_pause(lab, "-p", "3"))
        _paused(lab, 3, ind0)
        yield time.monotonic()
    finally:
        _speed(g, 100)


def test_xon_resumes_before_the_pause_time_ends(lab, dst):
    """At 10 Mbit/s one XOFF of 65535 quanta lasts 3.36 s; XON (quanta 0)
    ends it at once: the held frames leave long before."""
    g = lab.h1
    with _one_long_pause(lab) as t0:
        send(g, dst, count=10, rate=1000, flow=3, so_priority=3)
        assert held(g) == 10
        lab.h2.wait(_pause(lab, "-p", "3", "-q", "0"))
        wait_for("h1's held frames sent", lambda: held(g),
                 lambda n: n == 0, timeout=10)
        # Released by the XON, not by the end of the 3.36 s pause.
        assert time.monotonic() - t0 < 3.0, \
            f"held frames left {time.monotonic() - t0:.2f} s after XOFF"


def test_pause_of_a_priority_without_pfc_is_counted_and_ignored(lab, dst):
    """Priority 1 has PFC off on h1: its pause frames count in
    indications[1] and stop nothing."""
    ind0 = indications(lab.h1, 1)
    p = _pause(lab, "-p", "1", count=50)
    _paused(lab, 1, ind0)
    send(lab.h1, dst, count=20, rate=1000, flow=1, so_priority=1)
    assert held(lab.h1) == 0
    lab.h2.wait(p)
    assert indications(lab.h1, 1) - ind0 == 50


def test_other_mac_control_frames_are_dropped_and_counted(lab, dst):
    """802.3x PAUSE (opcode 1), a PFC frame cut short and one sent to h1's
    own address instead of the PFC address never reach h1's stack and
    pause nothing: each counts once in rx_dropped, none in indications.
    (A frame to a multicast address h1 did not join, 01:80:c2:00:00:02,
    never reaches the driver: the device's RX filter drops it.)"""
    g = lab.h1
    mac = lab.wire.mac(lab.topology.host("h1").nic("eth0"))

    def rx_dropped():
        return int(g.read("/sys/class/net/eth0/statistics/rx_dropped"))
    d0, ind0 = rx_dropped(), indications(g, 3)
    for extra in (["--opcode", "1"], ["--length", "20"], ["--dst", mac]):
        lab.h2.wait(_pause(lab, "-p", "3", *extra, count=5))
    wait_for("h1's rx_dropped up by 15", rx_dropped,
             lambda n: n - d0 >= 15, timeout=10)
    assert rx_dropped() - d0 == 15
    assert indications(g, 3) == ind0
    send(g, dst, count=10, rate=1000, flow=3, so_priority=3)
    assert held(g) == 0


def test_pause_storm_stops_the_victim_priority_only_no_tx_timeout(lab,
                                                                   dst):
    """XOFF for priority 3 every 20 ms for 7 s, longer than the TX
    watchdog's 5 s: priority 3 stays held the whole time, priority 0
    keeps moving, the queue's trans_start is renewed so no TX timeout is
    reported, and the held frames leave within one pause time of the
    storm's end. At 10 Mbit/s (one XOFF: 3.36 s) so that a debug
    kernel's slow guests never let a pause lapse between two frames."""
    g = lab.h1
    _speed(g, 10)
    ind0 = indications(g, 3)
    p = _pause(lab, "-p", "3", count=350)
    _paused(lab, 3, ind0)
    send(g, dst, count=20, rate=1000, flow=3, so_priority=3)
    for _ in range(3):
        time.sleep(2)
        assert held(g) == 20
        res = send(g, dst, count=20, rate=1000, flow=0, so_priority=0)
        assert res["sent"] == 20 and held(g) == 20
    lab.h2.wait(p, timeout=30)
    wait_for("h1's held frames sent after the storm", lambda: held(g),
             lambda n: n == 0, timeout=8)
    stats = g.run(["ethtool", "-S", "eth0"]).stdout
    timeouts = [int(ln.split(":")[1]) for ln in stats.splitlines()
                if "tx_timeouts:" in ln]
    assert timeouts and sum(timeouts) == 0
    assert "TX timeout" not in g.run(["dmesg"]).stdout


def test_link_down_ends_a_pause(lab, dst):
    """A pause does not outlive the link: h1 at 10 Mbit/s (one XOFF lasts
    3.36 s), its link set down and up while paused: the frames sent after
    leave once the link is up, before the pause would have ended."""
    g = lab.h1
    with _one_long_pause(lab) as t0:
        g.run(["ip", "link", "set", "eth0", "down"])
        g.run(["ip", "link", "set", "eth0", "up"])
        send(g, dst, count=5, rate=1000, flow=3, so_priority=3)
        wait_for("h1's frames sent", lambda: held(g), lambda n: n == 0,
                 timeout=10)
        assert time.monotonic() - t0 < 3.0


def test_malformed_mac_control_frames_under_traffic_leave_no_queue_stopped(
        lab, dst):
    """The new surface fuzzed: h2 sends a mix of MAC control frames (short,
    other opcodes, all-ones vector, maximum and zero quanta, bursts,
    pauses of priorities without PFC) while h1 sends priority 3 and 0
    and PFC on h1 is switched off and on; after the last pause has
    expired nothing is held, and priority 3 still pauses and resumes.
    Splats and (debug kernel) kmemleak reports fail the run."""
    g = lab.h1
    mix = [["-p", "3", "--length", "14"], ["-p", "3", "--length", "33"],
           ["-p", "3", "--opcode", "2"], ["-p", "3", "--opcode", "0xffff"],
           ["--vector", "0xffff"],
           ["--vector", "0xff00"], ["-p", "all", "-q", "65535"],
           ["-p", "all", "-q", "0"], ["-p", "1,2,4", "-q", "1"],
           ["-p", "3", "-q", "65535"], ["-p", "3", "-q", "0"]]
    flows = [g.spawn(["priosend", "-j", "-P", str(p), "-c", "600", "-r",
                      "300", "-f", str(p), dst]) for p in (0, 3)]
    for i in range(3):
        for extra in mix:
            lab.h2.wait(_pause(lab, *extra, count=5, interval=0.002))
        g.run(["dcb", "pfc", "set", "dev", "eth0", "prio-pfc",
               "3:off" if i % 2 == 0 else "3:on"])
    g.run(["dcb", "pfc", "set", "dev", "eth0", "prio-pfc", "3:on"])
    for f in flows:
        assert json.loads(g.wait(f, timeout=60).stdout)["sent"] == 600
    # The longest pause sent (65535 quanta, 335 ms) is over: none held.
    wait_for("h1's queues empty", lambda: held(g), lambda n: n == 0,
             timeout=5)
    _speed(g, 10)   # one XOFF lasts 3.36 s, beyond a slow guest's steps
    ind0 = indications(g, 3)
    lab.h2.wait(_pause(lab, "-p", "3", count=20))
    _paused(lab, 3, ind0)
    send(g, dst, count=5, rate=1000, flow=3, so_priority=3)
    assert held(g) == 5
    lab.h2.wait(_pause(lab, "-p", "3", "-q", "0"))
    wait_for("h1's frames sent after XON", lambda: held(g),
             lambda n: n == 0, timeout=5)
