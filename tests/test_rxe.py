"""Soft-RoCE (rdma_rxe, kernel-patches/lab.config) between the two
guests of the default lab, which has no `rdma` key: the tests make the
devices themselves and the restore between tests deletes them. CI runs
this file on the debug kernel too (.ci/run): rxe's send, receive and
completion paths and the RDMA core under KASAN, lockdep and kmemleak.
The fabric's RoCE scenarios are tests/test_roce.py."""

from dcblab.scenarios.roce import (ERROR_COUNTERS, parse_bw, rxe_stats,
                                   wait_listening)

PORT = 18530
# 4 KiB writes: the debug kernel moves ~6 Mbit/s of rxe under TCG, and a
# 5 s run of 64 KiB writes there completed none (docs/roce.md).
SIZE = 4096
WRITES = 200


def _rxe(guest):
    guest.run(["rdma", "link", "add", "rxe0", "type", "rxe", "netdev",
               "eth0"])


def test_rdma_writes_between_two_hosts_complete_without_errors(lab):
    """rxe0 on eth0 of h1 and h2, 200 RDMA writes of 4 KiB from h1 to h2
    over rdma_cm: perftest completes them all, rxe sent at least a
    packet per 1 KiB of payload (its MTU on a 1500-byte link) and its
    error counters did not move."""
    h1, h2 = lab.guest("h1"), lab.guest("h2")
    for g in (h1, h2):
        _rxe(g)
    before = {g.name: rxe_stats(g) for g in (h1, h2)}
    common = ["ib_write_bw", "-R", "-d", "rxe0", "-p", str(PORT), "-F",
              "-n", str(WRITES), "-s", str(SIZE)]
    server = h2.spawn(common)
    try:
        wait_listening(h2, [PORT])
        res = h1.run([*common, lab.topology.address("h2")], timeout=180)
    finally:
        srv = h2.wait(server, timeout=60, check=False)
    iterations, _ = parse_bw(res.stdout)
    assert iterations == WRITES and srv.rc == 0
    after = {g.name: rxe_stats(g) for g in (h1, h2)}
    sent = after["h1"]["sent_pkts"] - before["h1"]["sent_pkts"]
    assert sent >= WRITES * SIZE // 1024
    for name in ("h1", "h2"):
        for k in ERROR_COUNTERS:
            assert after[name][k] == before[name][k], (name, k)


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
