"""The DCB fabric (topology/dcb-fabric.toml): h1, h2 and h3 on a switch
VM, sw, whose port toward h3 is shaped; sw trusts the PCP on ingress,
enforces its DCB configuration with `ets` under the shaper, and hands it
to the hosts by DCBX. Expected numbers come from the topology file.
docs/fabric.md explains the data path and the measurements."""

import json

import pytest

from dcblab.scenarios.fabric import congested_port, expected_shares, offer
from dcblab.testing.dcb import apps_of, ets_of, peer_tlv, pfc_of
from dcblab.testing.traffic import Sink, flow_of, pcp_counts, send

# How far a measured share may be from the configured one (the issue's
# goal: 5 percentage points).
SHARE_TOLERANCE = 0.05
# Each ETS class is offered this many times the port's line rate in all.
LOAD = 1.2


@pytest.fixture(scope="module")
def port(fabric):
    sw, port, rx = congested_port(fabric.topology)
    assert (sw.name, port.name, rx) == ("sw", "swp3", "h3")
    return port


def _mac(fabric, host, nic):
    return fabric.wire.mac(fabric.topology.host(host).nic(nic))


def test_pcp_is_kept_from_h1_through_sw_to_h3_on_vlan_100(fabric):
    dst = fabric.topology.address("h3", vlan=100)
    fabric.h1.run(["ping", "-c", "1", "-W", "2", dst])
    sink = Sink(fabric.h3, "eth0", count=3 * 50, timeout=20)
    for pcp in (1, 5, 7):
        send(fabric.h1, dst, count=50, rate=200, flow=pcp, so_priority=pcp)
    got = sink.result()
    for pcp in (1, 5, 7):
        assert pcp_counts(flow_of(got, pcp)) == {pcp: 50}
    # sw's ingress trusted each PCP: its filter for that PCP counted it.
    out = fabric.sw.run(["tc", "-s", "filter", "show", "dev", "swp1",
                         "ingress"]).stdout
    assert "vlan_prio 5" in out and "skbedit" in out


def test_lldp_ends_at_the_switch_each_host_sees_only_its_port(fabric):
    """Each host's lldpad neighbour is the switch port it is cabled to:
    the bridge does not forward LLDP (01:80:c2:00:00:0e), so h3 never
    hears h1 or h2."""
    for host, port in (("h1", "swp1"), ("h2", "swp2"), ("h3", "swp3")):
        chassis = peer_tlv(fabric.guest(host), "chassisID")
        assert _mac(fabric, "sw", port) in chassis.lower(), chassis
        for other in {"h1", "h2", "h3"} - {host}:
            assert _mac(fabric, other, "eth0") not in chassis.lower()


def test_hosts_adopt_their_switch_ports_dcb_by_dcbx(fabric):
    for host in ("h1", "h2", "h3"):
        g = fabric.guest(host)
        port = fabric.topology.host("sw").nic(
            fabric.topology.host(host).nics[0].peer.split(":")[1])
        d = port.dcb
        assert ets_of(g) == dict(prio_tc=d.prio_tc, tsa=d.tsa, bw=d.bw)
        assert pfc_of(g) == list(d.pfc)
        assert apps_of(g) == sorted((a.protocol, a.priority)
                                    for a in d.apps)


def test_ets_shares_at_the_congested_port_match_the_file(fabric, port,
                                                         tmp_path):
    """Three ETS classes (PCP 0, 2, 3: 20/30/50 in dcb-fabric.toml), each
    offered 1.2 x line rate from h1 and h2 at once: h3's per-class bytes
    over the steady interval split as configured. The classes' frames die
    at sw's ETS queues (drops counted there), not before."""
    pcps = (0, 2, 3)
    r = offer(fabric, pcps, load=LOAD)
    (tmp_path / "shares.json").write_text(json.dumps(r.as_json()))
    got = {p: round(r.share(p), 3) for p in pcps}
    want = expected_shares(port.dcb, pcps)
    print(f"shares {got}, configured {want}; port {r.wire_bps / 1e6:.2f} "
          f"Mbit/s by the host's clock")
    for p in pcps:
        assert abs(r.share(p) - want[p]) <= SHARE_TOLERANCE, (got, want)
    assert r.wrong_pcp == 0
    # The two smaller classes were held back by the scheduler: their
    # bands dropped; the port was full.
    bands = r.qdisc
    assert bands["10:2"]["drops"] > 0 and bands["10:3"]["drops"] > 0, bands
    assert r.wire_bps >= 0.9 * port.rate_bps


def test_one_class_alone_gets_the_whole_port(fabric, port):
    """Work conserving: PCP 2 (30 % share) alone, offered 1.2 x line rate
    from three flows per sender, fills the port (measured on the wire by
    the host's clock)."""
    r = offer(fabric, (2, 2, 2), load=LOAD)
    print(f"PCP 2 alone: {r.wire_bps / 1e6:.2f} Mbit/s of "
          f"{port.rate_bps / 1e6:.0f}")
    assert r.share(2) == 1.0
    assert r.wire_bps >= 0.9 * port.rate_bps
    assert r.wrong_pcp == 0
