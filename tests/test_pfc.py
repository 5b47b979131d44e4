"""PFC (IEEE 802.1Qbb) in the fabric (topology/dcb-fabric.toml): sw's
agent pfcd sends pause frames from its lossless band's backlog, the
hosts' virtio_net honours them (kernel-patches/0005; its own behaviour is
tests/test_pfc_driver.py), and priority 3 is lossless end to end while 0
and 2 drop. docs/pfc.md explains the frame, the data path and the
figures."""

import json

import pytest

from dcblab.scenarios.fabric import congested_port
from dcblab.scenarios.pfc import (band_of, head_of_line, lossless, pause_storm,
                                  pfcd_state, switch_pfc)
from dcblab.testing.dcb import lldp_set, pfc_of, switch_pfc_back, wait_for

# ETS shares with PFC on: within this of the configuration (the issue's
# 5 percentage points), as without PFC (tests/test_fabric.py).
SHARE_TOLERANCE = 0.05
# Frames of priority 3 per sender in the lossless runs: 10^4 in all.
FRAMES = 5000


def test_pfc_is_on_priority_3_at_both_ends_with_pfc_cap_8(fabric):
    """The fabric's configuration as the drivers have it: sw's ports
    from the topology, the hosts' by DCBX; pfc_cap 8 everywhere, and each
    host joined the PFC address (01:80:c2:00:00:01), which its device's
    RX filter passes only then."""
    sw, _, _ = congested_port(fabric.topology)
    assert switch_pfc(fabric, sw) == {p.name: [3] for p in sw.nics}
    for h in ("h1", "h2", "h3"):
        g = fabric.guest(h)
        got = json.loads(g.run(["dcb", "-j", "pfc", "show", "dev",
                                "eth0"]).stdout)
        assert got["pfc_cap"] == 8
        assert [p for p, on in enumerate(got["prio_pfc"]) if on] == [3]
        assert "01:80:c2:00:00:01" in g.run(["ip", "maddr", "show", "dev",
                                             "eth0"]).stdout


def test_switch_pfc_back_undoes_a_port_left_without_pfc(fabric):
    """What the teaching labs' fixture runs after a fabric lab: a port
    whose PFC an operator turned off (lldptool, as labs 12 and 16 do) is
    put back, and the host facing it has it again by DCBX; a port as the
    topology says is left alone."""
    sw, port, rx = congested_port(fabric.topology)
    g = fabric.guest(sw.name)
    lldp_set(g, "PFC", "enabled=none", dev=port.name)
    wait_for(f"{port.name} without PFC", lambda: pfc_of(g, port.name),
             lambda v: v == [])
    assert switch_pfc_back(fabric) == [port.name]
    assert switch_pfc(fabric, sw) == {p.name: [3] for p in sw.nics}
    assert pfc_of(fabric.guest(rx), "eth0") == [3]
    assert switch_pfc_back(fabric) == []


@pytest.mark.parametrize("load", [1.2, 2.0])
def test_priority_3_is_lossless_while_0_and_2_drop(fabric, load):
    """PCP 0, 2 and 3 from h1 and h2 at once, each offered load x the
    port's line rate, 10^4 frames of PCP 3: every PCP-3 frame sent
    arrives at h3, none dropped in sw's band or on the wire or in the
    senders; PCP 0 and 2 drop at sw; the ETS shares hold; sw's pause
    frames on each port = what the host behind it received."""
    r = lossless(fabric, load=load, frames=FRAMES)
    print(json.dumps(r.as_json(), indent=1))
    assert r.sent(3) == 2 * FRAMES
    assert r.received(3) == r.sent(3), f"PCP 3 lost {r.lost(3)}"
    assert r.band_drops[3] == 0
    assert r.tap_drops == 0 and r.sink_drops == 0
    assert all(n == 0 for n in r.sender_drops.values())
    for pcp in (0, 2):
        assert r.band_drops[pcp] > 0 and r.lost(pcp) > 0
    for pcp, share in r.expected.items():
        assert abs(r.shares[pcp] - share) <= SHARE_TOLERANCE, r.shares
    for port, host in r.peer.items():
        assert r.requests[port] == r.indications[host]
    assert r.requests["swp1"] > 0 and r.requests["swp2"] > 0
    # The band never reached its limit: what arrived after XOFF fit.
    xoff, _, headroom = r.thresholds
    assert xoff <= r.pfcd["peak_backlog"] <= xoff + headroom


def test_without_pfc_priority_3_drops(fabric):
    """The negative control: PFC off on sw's ports (lldptool, as an
    operator would), the same load: no pause frame, and PCP 3 drops at
    sw's band like the others; PFC is back on after."""
    r = lossless(fabric, load=1.2, frames=FRAMES, pfc=False)
    print(json.dumps(r.as_json(), indent=1))
    assert r.band_drops[3] > 0 and r.lost(3) > 0
    assert all(n == 0 for n in r.requests.values())
    sw, _, _ = congested_port(fabric.topology)
    assert switch_pfc(fabric, sw) == {p.name: [3] for p in sw.nics}


def test_pfcd_state_names_every_port_with_its_thresholds(fabric):
    """pfcd runs on sw as part of its baseline with each port's
    thresholds from the topology's defaults (dcblab.lab.switch)."""
    from dcblab.lab.switch import pfc_thresholds
    sw, port, _ = congested_port(fabric.topology)
    state = pfcd_state(fabric.sw)
    for p in sw.nics:
        xoff, xon, _ = pfc_thresholds(p)
        assert (state["ports"][p.name]["xoff"],
                state["ports"][p.name]["xon"]) == (xoff, xon)
    xoff, _, headroom = pfc_thresholds(port)
    out = fabric.sw.run(["tc", "qdisc", "show", "dev", port.name]).stdout
    band = band_of(port.dcb, 3).split(":")[1]
    assert f"parent 10:{band} limit {xoff + headroom}b" in out


def test_head_of_line_blocking_slows_a_flow_on_an_idle_path(fabric):
    """PFC's first cost: h1's priority-3 round trips to h2 cross no
    congested port, yet while sw pauses h1's and h2's priority 3 for
    swp3 they wait with the frames for h3 (one class, one set of
    queues): their median RTT grows, and none is lost."""
    r = head_of_line(fabric)
    print(json.dumps(r.as_json(), indent=1))
    assert len(r.alone_ms) == r.probes and len(r.congested_ms) == r.probes
    assert r.h1_paused > 0
    assert r.slowdown > 2, r.as_json()


def test_pause_storm_is_caught_by_the_switch_watchdog(fabric):
    """PFC's second cost, and the switch's answer: h3 pauses sw:swp3's
    priority 3 without end; sw honours it, its band for priority 3 stops
    sending (and swp3's root qdisc with it), and pfcd's watchdog declares
    it stormed (200 ms): it stops pausing h1 for it, so the pause does
    not spread, stops honouring h3's pauses and drops priority 3 there;
    priority 0 then goes through again, none lost; once the storm is
    over the band is restored and priority 3 flows again."""
    r = pause_storm(fabric)
    print(json.dumps(r.as_json(), indent=1))
    assert r.swp3_indications > 0
    assert r.storms >= 1
    assert any("stormed" in ln for ln in r.log)
    assert any("restored" in ln for ln in r.log)
    # Paused at most for the watchdog's detection time (200 ms of XOFF
    # every 10 ms, and slack for pfcd's own gaps), not for the storm's 4 s.
    assert r.h1_xoff <= 60, r.as_json()
    assert r.band_drops > 0
    assert r.lossy_received == r.lossy_sent
    assert r.after_received == r.after_sent
