"""RoCEv2 through the fabric (topology/dcb-fabric.toml, docs/roce.md):
soft-RoCE (rxe0 on each host's eth0) carries perftest's RDMA writes and
sends; its priority comes from the DSCP sw advertises (APP DSCP 26 ->
3), applied on the hosts by dcbapp-netprio's nftables rule and on sw by
its ports' DSCP trust. The scenarios are dcblab.scenarios.roce.

Not here: RoCE streams beside bulk traffic with PFC and without. Under
that load the streams stall in this lab, with PFC on and often with it
off, differently from run to run (docs/roce.md, "Open: RoCE under
load"): there is no behaviour of PFC's yet to assert."""

import json

from dcblab.lab.baseline import restore
from dcblab.scenarios.roce import (dscp_rules, roce_dscp, send_latency,
                                   write_streams)
from dcblab.testing.dcb import ets_of, queue_tcs

# The window the streams are counted over, seconds.
SECONDS = 10


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


# Counters are read on each guest in turn (in parallel, but not at one
# instant): a window's counts of one packet stream on two machines may
# differ by the packets in flight between the reads.
SKEW = 0.95


def test_roce_write_alone_leaves_on_its_class_and_sw_trusts_its_dscp(
        fabric):
    """One RDMA write stream h1 -> h3, untagged, nothing else on the
    fabric, measured over a 10 s window: what rxe sent left h1's eth0 on
    the TX queues of priority 3's class (dcbapp-netprio's DSCP rule gave
    it priority 3), sw's DSCP trust filter on swp1 gave it priority 3
    and the congested port sent it in the band of priority 3's TC,
    dropping none; rxe retried nothing."""
    r = write_streams(fabric, senders=("h1",), seconds=SECONDS)
    print(json.dumps(r.as_json(), indent=1))
    s = r.streams[0]
    assert s.rc == 0 and s.through_window and s.sent_pkts > 0
    tc, queues = _roce_tc_queues(fabric.guest("h1"))
    sent = r.tx_queues["h1"]
    assert sum(sent.get(q, 0) for q in queues) >= SKEW * s.sent_pkts, \
        (tc, queues, sent)
    assert r.trusted["swp1"] >= SKEW * s.sent_pkts
    assert r.band_packets >= SKEW * s.sent_pkts
    assert r.band_drops == 0
    assert r.error_total == 0, r.errors


def test_roce_over_vlan_leaves_with_pcp_3(fabric):
    """The same stream to h3's VLAN 100 address: rxe sends on eth0.100
    (its GID there), the daemon's rule on eth0.100 gives priority 3 and
    the VLAN's egress map PCP 3; sw's tagged DSCP filter classifies it
    and the congested port's band of priority 3 carries it."""
    r = write_streams(fabric, senders=("h1",), seconds=SECONDS, vlan=100)
    print(json.dumps(r.as_json(), indent=1))
    s = r.streams[0]
    assert s.rc == 0 and s.sent_pkts > 0
    assert r.trusted["swp1"] >= SKEW * s.sent_pkts
    assert r.band_packets >= SKEW * s.sent_pkts
    assert r.band_drops == 0


def test_strict_class_latency_beats_best_effort_under_load(fabric):
    """ib_send_lat h1 -> h3 at DSCP 46 (priority 5, sw's strict TC) and
    at DSCP 0 (best effort, TC 0), each for 16 s while PCP 0 and 2
    overload swp3: round trips at the strict class completed, and took
    less on average than best effort's (which may complete none: its
    lost packets wait for rxe's 1 s retry timer)."""
    strict = send_latency(fabric, prio=5)
    be = send_latency(fabric, prio=0)
    print(json.dumps({"strict": strict.as_json(), "best_effort":
                      be.as_json()}, indent=1))
    assert strict.dscp == roce_dscp(fabric.topology, 5) and be.dscp == 0
    assert strict.iterations > 0
    assert be.iterations < strict.iterations
    assert be.iterations == 0 or be.t_avg_us > strict.t_avg_us


def test_dcbapp_turns_the_app_dscp_entries_into_nft_rules(fabric):
    """dcbapp-netprio on h1, with the APP table lldpad adopted from sw
    (DSCP 26 -> 3, 46 -> 5): its table inet dcbapp gives each DSCP its
    priority on eth0 and eth0.100, IPv4 and IPv6, for packets without a
    priority of their own; stopped (--cleanup), the table is gone."""
    from dcblab.lab import start_dcbapp, stop_dcbapp
    from dcblab.testing.dcb import wait_for
    h1 = fabric.guest("h1")
    start_dcbapp(h1.machine, "--dev", "eth0")
    try:
        rules, _ = wait_for("dcbapp-netprio's DSCP rules",
                            lambda: dscp_rules(h1), lambda r: len(r) == 8)
    finally:
        stop_dcbapp(h1.machine)
    for dev in ("eth0", "eth0.100"):
        for fam in ("ip", "ip6"):
            for dscp, prio in ((26, 3), (46, 5)):
                assert any(r.startswith(f'oifname "{dev}" {fam} dscp '
                                        f"{dscp:#x} meta priority none")
                           and r.endswith(f"meta priority set 0:{prio}")
                           for r in rules), (dev, fam, dscp, rules)
    assert dscp_rules(h1) == []
