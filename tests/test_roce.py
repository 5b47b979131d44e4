"""RoCEv2 through the fabric (topology/dcb-fabric.toml, docs/roce.md):
soft-RoCE (rxe0 on each host's eth0) carries perftest's RDMA writes and
sends; its priority comes from the APP entries sw advertises (DSCP 26
-> 3 and UDP port 4791 -> 3), applied on the hosts by dcbapp-netprio's
nftables rules and on sw by its ports' DSCP trust (and PCP trust, for
RoCE on VLAN 100). The scenarios are dcblab.scenarios.roce; the lossless
class under load with PFC and without is
test_roce_under_load_is_lossless_with_pfc_and_collapses_without (on VLAN
100) and test_untagged_roce_under_load_is_lossless_with_pfc."""

import json

from dcblab.lab.baseline import restore
from dcblab.scenarios.fabric import congested_port, expected_shares
from dcblab.scenarios.roce import (dscp_rules, lossy_band_packets,
                                   port_rules, roce_dscp, send_latency,
                                   write_streams)
from dcblab.testing.dcb import ets_of, queue_tcs

# The window the streams are counted over, seconds.
SECONDS = 10
# The two streams alone are counted over their whole run (r.run), not
# over the window, whose rate nothing asserts: a shorter one only
# shortens the run (perftest's run is the window and ~18 s around it).
ALONE_S = 3
# What PCP 0 and 2 each offer swp3 beside the RoCE streams, x its rate.
LOAD = 1.2


def test_every_rdma_nic_has_its_rxe_device_on_it(fabric):
    """The baseline made rxe0 on eth0 of each host (topology key rdma):
    libibverbs lists it (ibv_devices, through the rxe provider) and the
    rdma tool shows it on eth0, RoCE with an active port."""
    for h in ("h1", "h2", "h3"):
        g = fabric.guest(h)
        assert "rxe0" in g.run(["ibv_devices"]).stdout
        link = json.loads(g.run(["rdma", "-j", "link", "show"]).stdout)
        assert [(lk["ifname"], lk["netdev"], lk["state"]) for lk in link] \
            == [("rxe0", "eth0", "ACTIVE")]


def test_restore_makes_a_deleted_rxe_device_again(fabric):
    """A test that deletes the baseline's rxe device gets it back from
    the restore between tests (guest-image/restore, DCBLAB_RDMA)."""
    h1 = fabric.guest("h1")
    h1.run(["rdma", "link", "del", "rxe0"])
    assert "rxe0" not in h1.run(["ibv_devices"]).stdout
    res = restore(h1.machine, fabric.topology.host("h1"), dcbx=True)
    assert "rdma link rxe0 on eth0 made again" in res.stdout
    assert "rxe0" in h1.run(["ibv_devices"]).stdout


def _roce_tc_queues(g, prio=3):
    """The TX queues of eth0's traffic class of prio (the class DCBX
    gave the host), and that class."""
    tc = ets_of(g)["prio_tc"][prio]
    return tc, {q for q, t in queue_tcs(g).items() if t == tc}


# Of the packets rxe sends for one perftest run (~33 000), those not of
# the measured QP carry ToS 0 (rdma_cm's MADs, perftest's exchange QP):
# 35 in each run measured.
TOS0 = 0.99


def test_roce_write_alone_leaves_on_its_class_and_sw_trusts_its_dscp(
        fabric):
    """One RDMA write stream h1 -> h3, untagged, nothing else on the
    fabric, counted over its whole run (r.run: from before the connects
    to after perftest's exit): everything rxe sent left h1's eth0 on the
    TX queues of priority 3's class (dcbapp-netprio's rules gave it
    priority 3); sw's DSCP trust filter on swp1 gave priority 3 to all
    but the ToS 0 ones, and the congested port's band of priority 3's
    TC sent exactly what the trust filters gave it, dropping none; rxe
    retried nothing."""
    r = write_streams(fabric, senders=("h1",), seconds=ALONE_S)
    print(json.dumps(r.as_json(), indent=1))
    s = r.streams[0]
    assert s.rc == 0 and s.through_window and s.sent_pkts > 0
    run, sent = r.run, r.run["sent"]["h1"]
    tc, queues = _roce_tc_queues(fabric.guest("h1"))
    out = run["tx_queues"]["h1"]
    assert sum(out.get(q, 0) for q in queues) >= sent, (tc, queues, out)
    assert sent >= run["trusted"]["swp1"] >= TOS0 * sent
    assert run["band_packets"] == run["trusted"]["swp1"] + \
        run["trusted"]["swp2"]
    assert run["band_drops"] == 0
    assert r.error_total == 0, r.errors


def test_roce_over_vlan_leaves_with_pcp_3(fabric):
    """The same stream to h3's VLAN 100 address: rxe sends on eth0.100
    (its GID there), the daemon's rules on eth0.100 give priority 3 and
    the VLAN's egress map PCP 3; sw's tagged DSCP filter classifies the
    measured QP's packets, and PCP 3 the ToS 0 ones: the congested
    port's band of priority 3 carries every packet rxe sent (counted
    over the whole run)."""
    r = write_streams(fabric, senders=("h1",), seconds=ALONE_S, vlan=100)
    print(json.dumps(r.as_json(), indent=1))
    s = r.streams[0]
    assert s.rc == 0 and s.sent_pkts > 0
    run, sent = r.run, r.run["sent"]["h1"]
    assert sent >= run["trusted"]["swp1"] >= TOS0 * sent
    assert run["band_packets"] >= sent
    assert run["band_drops"] == 0


def test_strict_class_latency_beats_best_effort_under_load(fabric):
    """ib_send_lat h1 -> h3 at DSCP 46 (priority 5, sw's strict TC) and
    at DSCP 0 without dcbapp-netprio (best effort, TC 0), each for 16 s
    while PCP 0 and 2 overload swp3: round trips at the strict class
    completed, and took less on average than best effort's (which may
    complete none: its lost packets wait for rxe's 1 s retry timer)."""
    strict = send_latency(fabric, prio=5)
    be = send_latency(fabric, prio=0)
    print(json.dumps({"strict": strict.as_json(), "best_effort":
                      be.as_json()}, indent=1))
    assert strict.dscp == roce_dscp(fabric.topology, 5) and be.dscp == 0
    assert strict.iterations > 0
    assert be.iterations < strict.iterations
    assert be.iterations == 0 or be.t_avg_us > strict.t_avg_us


def _assert_lossless(r, want):
    """r (write_streams with PFC on) is lossless: both streams connected
    through the window, sw paused both senders, the RoCE band (its
    bfifo) dropped nothing, rxe counted no error at either end, and the
    goodput reached 70% of want, the band's ETS share in Mbit/s."""
    assert all(s.rc == 0 and s.through_window for s in r.streams), \
        r.streams
    assert r.band_limit is None
    assert all(n > 0 for n in r.indications.values()), r.indications
    assert r.band_drops == 0
    assert r.error_total == 0, r.errors
    assert r.goodput_mbit_s >= 0.7 * want, (r.goodput_mbit_s, want)


def test_roce_under_load_is_lossless_with_pfc_and_collapses_without(
        fabric):
    """RDMA write streams h1 -> h3 and h2 -> h3 on VLAN 100 while PCP 0
    and 2 from both offer 1.2 x swp3's rate each, 10 s window. With PFC
    on priority 3: sw paused both senders, the RoCE band dropped
    nothing, rxe counted no error at either end (h3's responder saw no
    gap) and the streams got at least 70% of the band's ETS share. With
    PFC off and the band a lossy class's buffer (lossy_band_packets():
    less than rxe keeps in flight): no pause, the band dropped RoCE,
    h3's responder saw gaps and the senders went back (NAKs, retry
    timeouts), and the goodput fell below half of PFC's. Both runs'
    streams stay connected: rxe retries, it does not give up."""
    _, port, _ = congested_port(fabric.topology)
    want = expected_shares(port.dcb, (0, 2, 3))[3] * port.rate_bps / 1e6
    on = write_streams(fabric, seconds=SECONDS, vlan=100, load=LOAD)
    off = write_streams(fabric, seconds=SECONDS, vlan=100, load=LOAD,
                        pfc=False)
    print(json.dumps({"on": on.as_json(), "off": off.as_json(),
                      "share_mbit_s": want}, indent=1))
    _assert_lossless(on, want)
    assert all(s.rc == 0 and s.through_window for s in off.streams), \
        off.streams
    assert off.errors["retry_exceeded_err"] == 0
    assert off.band_limit == lossy_band_packets(port)
    assert not any(off.indications.values()), off.indications
    assert off.band_drops > 0
    assert off.errors["out_of_seq_request"] > 0, off.errors
    assert off.errors["rcvd_seq_err"] + off.errors["completer_retry_err"] \
        > 0, off.errors
    assert off.goodput_mbit_s < 0.5 * on.goodput_mbit_s, \
        (off.goodput_mbit_s, on.goodput_mbit_s)


def test_untagged_roce_under_load_is_lossless_with_pfc(fabric):
    """The same two streams untagged, PFC on: classified by their DSCP
    alone at sw (the common RoCE deployment), they are lossless too:
    pauses to both senders, no band drop, no rxe error, at least 70% of
    the share. Their ToS-0 packets (rdma_cm's, perftest's exchange) meet
    sw's best-effort band, but write_streams makes the connections
    before the load and perftest exchanges its results after it."""
    _, port, _ = congested_port(fabric.topology)
    want = expected_shares(port.dcb, (0, 2, 3))[3] * port.rate_bps / 1e6
    r = write_streams(fabric, seconds=SECONDS, load=LOAD)
    print(json.dumps({"on": r.as_json(), "share_mbit_s": want}, indent=1))
    _assert_lossless(r, want)


def test_dcbapp_turns_the_app_entries_into_nft_rules(fabric):
    """dcbapp-netprio on h1, with the APP table lldpad adopted from sw
    (DSCP 26 -> 3, 46 -> 5, UDP port 4791 -> 3): its table inet dcbapp
    gives each DSCP its priority on eth0 and eth0.100, IPv4 and IPv6,
    and UDP (and DCCP) port 4791 priority 3 on both, for packets without
    a priority of their own; stopped (--cleanup), the table is gone."""
    from dcblab.lab import start_dcbapp, stop_dcbapp
    from dcblab.testing.dcb import wait_for
    h1 = fabric.guest("h1")
    start_dcbapp(h1.machine, "--dev", "eth0")
    try:
        rules, _ = wait_for("dcbapp-netprio's DSCP rules",
                            lambda: dscp_rules(h1), lambda r: len(r) == 8)
        ports = port_rules(h1)
    finally:
        stop_dcbapp(h1.machine)
    for dev in ("eth0", "eth0.100"):
        for fam in ("ip", "ip6"):
            for dscp, prio in ((26, 3), (46, 5)):
                assert any(r.startswith(f'oifname "{dev}" {fam} dscp '
                                        f"{dscp:#x} meta priority none")
                           and r.endswith(f"meta priority set 0:{prio}")
                           for r in rules), (dev, fam, dscp, rules)
        # nft -n: the protocols by number, UDP 17 and DCCP 33
        assert any(r.startswith(f'oifname "{dev}" meta l4proto '
                                "{ 17, 33 } th dport 4791 meta priority "
                                "none") and
                   r.endswith("meta priority set 0:3") for r in ports), \
            (dev, ports)
    assert len(ports) == 2
    assert dscp_rules(h1) == [] and port_rules(h1) == []
