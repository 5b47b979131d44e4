"""Soft-RoCE (rdma_rxe, kernel-patches/lab.config) between the two
guests of the default lab, which has no `rdma` key: the tests make the
devices themselves and the restore between tests deletes them. CI runs
this file on the debug kernel too (.ci/run): rxe's send, receive and
completion paths and the RDMA core under KASAN, lockdep and kmemleak.
The fabric's RoCE scenarios are tests/test_roce.py."""

import json

from dcblab.scenarios.roce import parse_bw, rxe_stats, start_perftest

PORT = 18530
# 4 KiB writes: the debug kernel moves ~6 Mbit/s of rxe under TCG, and a
# 5 s run of 64 KiB writes there completed none (docs/roce.md).
SIZE = 4096
WRITES = 200


def _rxe(guest):
    guest.run(["rdma", "link", "add", "rxe0", "type", "rxe", "netdev",
               "eth0"])


def _writes(lab, h1, h2, port=PORT, netem=None):
    """WRITES RDMA writes of SIZE bytes from h1 to h2 over rdma_cm;
    with netem (its qdisc arguments), h1's eth0 sends through that
    qdisc from the start (a lost rdma_cm MAD is resent by rdma_cm, a
    lost RoCE packet by rxe).
    (iterations, {host: rxe's counters' change})"""
    before = {g.name: rxe_stats(g) for g in (h1, h2)}
    argv = ["ib_write_bw", "-R", "-d", "rxe0", "-p", str(port), "-F", "-n",
            str(WRITES), "-s", str(SIZE)]
    if netem:
        h1.run(["tc", "qdisc", "replace", "dev", "eth0", "root", "netem",
                *netem])
    server, client, _ = start_perftest(h2, h1, argv,
                                       lab.topology.address("h2"), port)
    try:
        res = h1.wait(client, timeout=180, check=False)
        client = None
    finally:
        if client:
            h1.run(["kill", str(client.pid)], check=False)
        srv = h2.wait(server, timeout=60, check=False)
    assert res.rc == 0 and srv.rc == 0, (res.stderr, srv.stderr)
    after = {g.name: rxe_stats(g) for g in (h1, h2)}
    delta = {n: {k: after[n][k] - before[n][k] for k in after[n]}
             for n in after}
    return parse_bw(res.stdout)[0], delta


def test_rdma_writes_between_two_hosts_complete(lab):
    """rxe0 on eth0 of h1 and h2, 200 RDMA writes of 4 KiB from h1 to h2
    over rdma_cm: perftest completes them all, rxe sent at least a
    packet per 1 KiB of payload (its MTU on a 1500-byte link), no QP ran
    out of retries, and every sequence NAK the requester (h1) took is
    one the responder (h2) sent for a gap it saw. On a quiet link rxe
    usually counts no error at all, but not always: one CI run of the
    debug kernel had one NAK in the 200 writes (docs/roce.md)."""
    h1, h2 = lab.guest("h1"), lab.guest("h2")
    for g in (h1, h2):
        _rxe(g)
    iterations, d = _writes(lab, h1, h2)
    assert iterations == WRITES
    assert d["h1"]["sent_pkts"] >= WRITES * SIZE // 1024
    for name in ("h1", "h2"):
        assert d[name]["retry_exceeded_err"] == 0, name
    assert d["h1"]["rcvd_seq_err"] <= d["h2"]["out_of_seq_request"], d


def test_rxe_recovers_rdma_writes_from_packets_lost_on_the_wire(lab):
    """The same writes with netem dropping 2% of what h1 sends: netem
    counts its drops, h2's responder sees the gaps (out_of_seq_request)
    and h1 goes back to resend (on a NAK or its retry timer), and every
    write still completes with no QP out of retries: RoCE over a lossy
    link is correct, only slow (docs/roce.md)."""
    h1, h2 = lab.guest("h1"), lab.guest("h2")
    for g in (h1, h2):
        _rxe(g)
    iterations, d = _writes(lab, h1, h2, PORT + 1,
                            netem=("loss", "2%"))
    q = json.loads(h1.run(["tc", "-s", "-j", "qdisc", "show", "dev",
                           "eth0", "root"]).stdout)
    drops = sum(x.get("drops", 0) for x in q if x.get("kind") == "netem")
    assert drops > 0, q
    assert iterations == WRITES
    assert d["h2"]["out_of_seq_request"] > 0, d
    # the requester went back: on the responder's NAK, or on its own
    # timer when the lost packet was the last of a burst
    assert d["h1"]["rcvd_seq_err"] + d["h1"]["completer_retry_err"] > 0, d
    for name in ("h1", "h2"):
        assert d[name]["retry_exceeded_err"] == 0, name


def test_rxe_refuses_a_vlan_device(lab):
    """`rdma link add` on a VLAN device fails: rxe wants the real
    device (its GIDs then include the VLAN's addresses), which is why
    the topology's rdma key is on a NIC."""
    h1 = lab.guest("h1")
    res = h1.run(["rdma", "link", "add", "rxe1", "type", "rxe", "netdev",
                  "eth0.100"], check=False)
    assert res.rc != 0
    assert "not permitted" in res.stderr, res.stderr
    assert "rxe1" not in h1.run(["ibv_devices"]).stdout


def test_restore_deletes_an_rdma_device_the_baseline_lacks(lab):
    """two-hosts has no rdma NIC: a device a test made is deleted by the
    restore between tests, and libibverbs lists none after."""
    from dcblab.lab.baseline import restore
    h1 = lab.guest("h1")
    _rxe(h1)
    res = restore(h1.machine, lab.topology.host("h1"))
    assert "deleted rdma link rxe0" in res.stdout
    assert "rxe0" not in h1.run(["ibv_devices"]).stdout
