"""dcbnl on virtio_net (kernel-patches/0002): what the driver accepts,
refuses and does, observed in the guests.

Valid configurations go through iproute2's ``dcb`` and are read back with
``dcb -j``; invalid ones through ``dcbnl-raw``, which sends the struct
unchecked (``dcb`` refuses most of them itself) and prints the errno the
kernel answered. The guests' ``dcb`` is built with our fix of 6.1.0's
reply handling (iproute2-patches/; test_dcb_reports_the_drivers_refusal).
The per-test restore resets DCB to the driver's defaults (``dcbnl-raw DEV
reset``).

The driver's refusal messages in the kernel log are ratelimited
(net_ratelimit()): a test asserts a refusal by the errno, not by the log.

lldpad is stopped in both guests for this module: a running DCBX agent
owns the port's DCB configuration. Every time lldpad builds an LLDPDU
(each msgTxInterval, 30 s, and at every change) its 802.1Qaz module runs
its state machines and writes its own operational ETS, PFC and APP to the
driver, so a configuration set with ``dcb`` lasts until the next LLDPDU
(seen: a partition made by ``dcb ets set`` gone within seconds). With
lldpad running, DCB is configured through lldptool (tests/test_dcbx.py).
"""

import json

import pytest

from dcblab.testing import (NETPRIO, Sink, cgroup, flow_of, map_priority,
                            pcp_counts, pcp_filters, pcp_packets, send)
from dcblab.testing.dcb import (TxQueueCounter, app_bytes, dcb_show,
                                dcbnl_raw, ets_bytes, lldpad_stopped,
                                pfc_bytes, queue_tcs)

VID = 100
VLAN_DEV = f"eth0.{VID}"
ALL = ("h1", "h2")


@pytest.fixture(scope="module", autouse=True)
def _without_lldpad(request, dcblab_labs):
    # module-scoped: the lab through dcblab_labs (lab is per test)
    with lldpad_stopped(_guests(dcblab_labs.for_node(request.node))):
        yield


def _guests(lab):
    return [lab.guest(h) for h in ALL]


def _channels(guest, undo, n):
    """ethtool -L eth0 combined n, undone to the baseline's 8 after."""
    res = guest.run(["ethtool", "-L", "eth0", "combined", str(n)],
                    check=False)
    undo.callback(guest.run, ["ethtool", "-L", "eth0", "combined", "8"])
    return res


# --- 1: show, set, read back -------------------------------------------------

def test_dcb_show_works_on_virtio_eth0_with_the_driver_defaults(lab):
    """ets_cap: one class per TX queue in use (8 here, at most 8);
    pfc_cap 8: the driver honours PFC pauses for any priority (TX NAPI,
    the default; tests/test_pfc.py shows them), PFC off until enabled."""
    for g in _guests(lab):
        ets = dcb_show(g, "ets")
        assert ets["ets_cap"] == 8
        assert ets["prio_tc"] == [0] * 8
        assert ets["tc_tsa"] == ["strict"] * 8
        assert ets["tc_bw"] == [0] * 8
        pfc = dcb_show(g, "pfc")
        assert pfc["pfc_cap"] == 8
        assert pfc["prio_pfc"] == [False] * 8
        assert dcb_show(g, "app") == {}
        dcbx = g.run(["dcb", "dcbx", "show", "dev", "eth0"]).stdout.split()
        assert dcbx == ["host", "ieee"]


def test_dcb_on_a_vlan_device_is_not_supported(lab):
    res = lab.h1.run(["dcb", "ets", "show", "dev", VLAN_DEV], check=False)
    assert res.rc != 0
    assert "not supported" in res.stderr.lower(), res.stderr


def test_valid_ets_pfc_app_are_read_back_exactly(lab):
    g = lab.h1
    g.run(["dcb", "ets", "set", "dev", "eth0",
           "prio-tc", "0:0", "1:0", "2:1", "3:1", "4:2", "5:2", "6:3", "7:3",
           "tc-tsa", "0:ets", "1:ets", "2:ets", "3:strict", "4:strict",
           "5:strict", "6:strict", "7:strict",
           "tc-bw", "0:50", "1:30", "2:20", "3:0", "4:0", "5:0", "6:0",
           "7:0",
           "reco-prio-tc", "all:0", "5:1", "reco-tc-tsa", "all:strict",
           "willing", "on"])
    ets = dcb_show(g, "ets")
    assert ets["prio_tc"] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert ets["tc_tsa"] == ["ets"] * 3 + ["strict"] * 5
    assert ets["tc_bw"] == [50, 30, 20, 0, 0, 0, 0, 0]
    assert ets["reco_prio_tc"] == [0, 0, 0, 0, 0, 1, 0, 0]
    assert ets["willing"] is True
    g.run(["dcb", "pfc", "set", "dev", "eth0", "prio-pfc", "3:on", "4:on",
           "delay", "100"])
    pfc = dcb_show(g, "pfc")
    assert pfc["prio_pfc"] == [p in (3, 4) for p in range(8)]
    assert pfc["delay"] == 100
    g.run(["dcb", "app", "add", "dev", "eth0", "dgram-port-prio", "4791:5",
           "ethtype-prio", "0x8906:3", "dscp-prio", "46:6"])
    app = dcb_show(g, "app")
    assert app["dgram_port_prio"] == [[4791, 5]]
    assert app["ethtype_prio"] == [[0x8906, 3]]
    assert app["dscp_prio"] == [[46, 6]]
    g.run(["dcb", "app", "del", "dev", "eth0", "dscp-prio", "46:6"])
    assert "dscp_prio" not in dcb_show(g, "app")
    # The other guest's NIC is its own device: untouched.
    assert dcb_show(lab.h2, "ets")["prio_tc"] == [0] * 8


# Each invalid configuration of the driver's checks; the valid baseline
# before each is ETS prio 0-3 -> TC 0-3 with ETS shares (2 ETS classes).
_VALID = dict(prio_tc=(0, 1, 2, 3, 0, 0, 0, 0),
              tsa=("ets", "ets", "strict", "strict") + ("strict",) * 4,
              bw=(60, 40, 0, 0, 0, 0, 0, 0))
_BAD_ETS = {
    "tsa-cbs": dict(_VALID, tsa=("cbs",) + ("strict",) * 7, bw=(0,) * 8),
    "tsa-vendor": dict(_VALID, tsa=("ets", "vendor") + ("strict",) * 6),
    "tsa-3": dict(_VALID, tsa=(3,) + ("strict",) * 7, bw=(0,) * 8),
    "bw-sum-90": dict(_VALID, bw=(50, 40, 0, 0, 0, 0, 0, 0)),
    "bw-sum-110": dict(_VALID, bw=(70, 40, 0, 0, 0, 0, 0, 0)),
    "ets-bw-0": dict(_VALID, bw=(0,) * 8),
    "prio-tc-8": dict(_VALID, prio_tc=(0, 1, 2, 3, 8, 0, 0, 0)),
    "prio-tc-255": dict(_VALID, prio_tc=(255,) + (0,) * 7),
    "reco-tsa-vendor": dict(_VALID, reco_tsa=("vendor",) * 8),
    "reco-bw-sum-50": dict(_VALID, reco_tsa=("ets",) + ("strict",) * 7,
                           reco_bw=(50,) + (0,) * 7),
    "reco-prio-tc-9": dict(_VALID, reco_prio_tc=(9,) + (0,) * 7),
}


@pytest.mark.parametrize("bad", list(_BAD_ETS), ids=list(_BAD_ETS))
def test_invalid_ets_is_einval_and_leaves_the_old_one(lab, bad):
    g = lab.h1
    assert dcbnl_raw(g, "eth0", "ets", ets_bytes(**_VALID)) == ""
    before = dcb_show(g, "ets")
    tcs = queue_tcs(g)
    assert dcbnl_raw(g, "eth0", "ets", ets_bytes(**_BAD_ETS[bad])) == \
        "EINVAL"
    assert dcb_show(g, "ets") == before
    assert queue_tcs(g) == tcs


def test_refusal_messages_are_ratelimited(lab):
    """50 refused sets in a row: the driver says why, but not 50 times
    (net_ratelimit(): 10 messages, then a pause of 5 s). The budget is
    shared by every net_ratelimit() message: the refusals of the tests
    before this one can have spent it (a CI run counted 0 here), so the
    loop starts once a 5 s window has passed."""
    g = lab.h1
    g.run(["dmesg", "-c"])
    bad = ets_bytes(**_BAD_ETS["bw-sum-90"]).hex()
    out = g.run(["sh", "-c", f"sleep 5.5; for i in $(seq 50); do dcbnl-raw "
                 f"eth0 ets {bad} 2>/dev/null; done; dmesg"],
                check=False).stdout
    said = out.count("DCB: refused: ETS bandwidth of the ETS classes sums "
                     "to 90, not 100")
    assert 1 <= said < 50, out


def test_ets_with_more_classes_than_tx_queues_in_use_is_einval(lab, undo):
    g = lab.h1
    assert _channels(g, undo, 2).rc == 0
    four = dict(_VALID)
    assert dcbnl_raw(g, "eth0", "ets", ets_bytes(**four)) == "EINVAL"
    assert dcb_show(g, "ets")["prio_tc"] == [0] * 8
    assert dcb_show(g, "ets")["ets_cap"] == 2
    two = dict(_VALID, prio_tc=(0, 1, 1, 1, 0, 0, 0, 0))
    assert dcbnl_raw(g, "eth0", "ets", ets_bytes(**two)) == ""
    assert queue_tcs(g) == {0: 0, 1: 1}


@pytest.mark.parametrize("sel, proto, prio", [
    ("dgram-port", 4791, 8), ("dscp", 46, 255), (0, 4791, 3), (6, 4791, 3),
    (255, 1, 1), ("dscp", 64, 3), ("dscp", 0xFFFF, 3)],
    ids=["prio-8", "prio-255", "selector-0", "selector-6", "selector-255",
         "dscp-64", "dscp-65535"])
def test_invalid_app_is_einval_and_leaves_the_table(lab, sel, proto, prio):
    g = lab.h1
    g.run(["dcb", "app", "add", "dev", "eth0", "dgram-port-prio", "4791:5"])
    before = dcb_show(g, "app")
    assert dcbnl_raw(g, "eth0", "app", app_bytes(sel, proto, prio)) == \
        "EINVAL"
    # A delete is not checked: what is not in the table is not found.
    assert dcbnl_raw(g, "eth0", "app", app_bytes(sel, proto, prio),
                     delete=True) == "ENOENT"
    assert dcb_show(g, "app") == before


def test_app_edges_are_accepted_and_a_duplicate_is_eexist(lab):
    g = lab.h1
    for sel, proto, prio in (("dscp", 63, 7), ("ethtype", 0x88F7, 0),
                             ("port", 1, 7), ("stream-port", 65535, 1)):
        assert dcbnl_raw(g, "eth0", "app", app_bytes(sel, proto, prio)) == ""
    # dcb_ieee_setapp() refuses an entry that is already there ...
    assert dcbnl_raw(g, "eth0", "app", app_bytes("dscp", 63, 7)) == "EEXIST"
    # ... but the same selector and protocol at another priority is a
    # second entry (IEEE 802.1Qaz allows several priorities per protocol).
    assert dcbnl_raw(g, "eth0", "app", app_bytes("dscp", 63, 2)) == ""
    assert sorted(dcb_show(g, "app")["dscp_prio"]) == [[63, 2], [63, 7]]
    assert dcbnl_raw(g, "eth0", "app", app_bytes("dscp", 62, 2),
                     delete=True) == "ENOENT"


def test_pfc_any_enable_bits_are_stored_and_counters_stay_0(lab):
    """The enable bits and delay are kept (a DCBX negotiation can be read
    back); pfc_cap stays 8 and the MACsec bypass bit is not kept; setting
    them sends no PFC frame and counts none (the counters are the
    device's: other tests' pause frames stay in them)."""
    g = lab.h1

    def counters():
        out = json.loads(g.run(["dcb", "-s", "-j", "pfc", "show", "dev",
                                "eth0"]).stdout)
        return out["requests"], out["indications"]
    before = counters()
    assert dcbnl_raw(g, "eth0", "pfc", pfc_bytes(0xA5, mbc=1, delay=7)) == ""
    pfc = dcb_show(g, "pfc")
    assert pfc["prio_pfc"] == [bool(0xA5 >> p & 1) for p in range(8)]
    assert pfc["delay"] == 7
    assert pfc["pfc_cap"] == 8
    assert pfc["macsec_bypass"] is False
    assert counters() == before


def test_dcbx_mode_other_than_host_ieee_is_refused(lab):
    g = lab.h1
    for mode in ("host cee", "lld-managed ieee", "host ieee cee"):
        res = g.run(["dcb", "dcbx", "set", "dev", "eth0", *mode.split()],
                    check=False)
        assert res.rc != 0, mode
    assert g.run(["dcb", "dcbx", "set", "dev", "eth0", "host",
                  "ieee"]).rc == 0
    assert g.run(["dcb", "dcbx", "show", "dev", "eth0"]).stdout.split() == \
        ["host", "ieee"]


def test_dcbnl_raw_get_prints_the_kernels_reply_with_the_app_table(lab):
    """`dcbnl-raw -j DEV get`: the RTM_GETDCB datagram in hex (what
    tools/test_dcbapp.c's captured message came from): its length in the
    netlink header, the entry just added as struct dcb_app bytes."""
    g = lab.h1
    g.run(["dcb", "app", "add", "dev", "eth0", "dgram-port-prio", "4791:5"])
    got = json.loads(g.run(["dcbnl-raw", "-j", "eth0", "get"]).stdout)
    raw = bytes.fromhex(got["hex"])
    assert len(raw) == got["bytes"] == int.from_bytes(raw[:4], "little")
    assert int.from_bytes(raw[4:6], "little") == 78      # RTM_GETDCB
    assert app_bytes("dgram-port", 4791, 5) in raw
    assert b"eth0\0" in raw


def test_dcb_reports_the_drivers_refusal(lab):
    """dcbnl answers an IEEE set with a reply whose u8 attribute
    (DCB_ATTR_IEEE) holds the driver's error, then an ACK of 0. dcb reads
    that attribute; 6.1.0's dcb read the ACK of its own GET before it
    instead and exited 0 (iproute2-patches/0001, docs/dcb.md). 20 times
    each, alternated: a refused set exits 1 with the errno, a valid one 0,
    and the refused one changed nothing."""
    g = lab.h1
    script = ("for i in $(seq 20); do "
              "dcb ets set dev eth0 tc-tsa 0:vendor 2>>/tmp/refused.err; "
              "echo refused $?; "
              "dcb ets set dev eth0 prio-tc 0:0 1:1 2:2 3:3 4:0 5:0 6:0 7:0 "
              "2>>/tmp/valid.err; echo valid $?; done; "
              "cat /tmp/refused.err /tmp/valid.err; "
              "rm -f /tmp/refused.err /tmp/valid.err")
    out = g.run(["sh", "-c", script]).stdout
    assert out.count("refused 1") == 20, out
    assert out.count("valid 0") == 20, out
    assert out.count("Attribute write: Invalid argument") == 20, out
    assert "Protocol error" not in out
    ets = dcb_show(g, "ets")
    assert ets["tc_tsa"][0] == "strict"
    assert ets["prio_tc"] == [0, 1, 2, 3, 0, 0, 0, 0]


def test_cee_app_entry_is_refused(lab):
    """CEE's DCB_CMD_SAPP: without a .setapp, dcbnl would put the entry in
    the APP table unchecked (even a priority of 200); the driver speaks
    IEEE only and refuses it: dcbnl's doit returns the error."""
    g = lab.h1
    res = g.run(["dcbnl-raw", "-j", "eth0", "cee-app", "0:0x8906:200"],
                check=False)
    assert json.loads(res.stdout)["name"] == "EOPNOTSUPP", res.stdout
    assert dcb_show(g, "app") == {}


# --- 2: ETS prio-tc + net_prio, no mqprio -------------------------------------

def test_dcb_ets_and_net_prio_put_a_cgroup_on_its_class_queues_and_pcp(lab):
    """dcb ets prio-tc partitions the 8 TX queues (4 classes, 2 queues
    each); a net_prio cgroup at priority 5 sends through eth0.100: every
    frame leaves on a queue of TC 2 and arrives on h2 with PCP 5."""
    g, count, prio = lab.h1, 10_000, 5
    prio_tc = [0, 0, 1, 1, 2, 2, 3, 3]
    g.run(["dcb", "ets", "set", "dev", "eth0", "prio-tc",
           *[f"{p}:{tc}" for p, tc in enumerate(prio_tc)]])
    tcs = queue_tcs(g)
    assert tcs == {q: q // 2 for q in range(8)}
    assert g.run(["tc", "qdisc", "show", "dev", "eth0", "root"]) \
        .stdout.split()[1] == "mq"  # no mqprio: the driver did it
    own = [q for q, tc in tcs.items() if tc == prio_tc[prio]]

    path, _ = cgroup(g, NETPRIO, "dcbprio")
    map_priority(g, path, VLAN_DEV, prio)
    pcp_filters(lab.h2, "eth0", VID)
    dst = lab.topology.address("h2", VID, "ipv4")
    g.run(["ping", "-c", "1", "-W", "2", dst])
    queues = TxQueueCounter(g)
    sink = Sink(lab.h2, "eth0", count=count, timeout=90, idle=3)
    send(g, dst, count=count, cgroup=path)
    f = flow_of(sink.result(), 1)
    delta = queues.delta()
    assert sum(delta[q] for q in own) >= count
    # Nothing else sends at priority 5: the class's queues carried exactly
    # the flow (0 misclassified), the other queues none of it.
    assert sum(delta[q] for q in own) == count, delta
    assert pcp_counts(f) == {prio: count}
    assert pcp_packets(lab.h2, "eth0")[prio] == count


# --- 6: ethtool -L below the number of classes --------------------------------

def test_ethtool_channels_below_the_classes_is_ebusy_and_the_map_stays(
        lab, undo):
    g = lab.h1
    g.run(["dcb", "ets", "set", "dev", "eth0", "prio-tc", "0:0", "1:1",
           "2:2", "3:3", "4:0", "5:0", "6:0", "7:0"])
    assert queue_tcs(g) == {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3}
    res = _channels(g, undo, 3)
    assert res.rc != 0
    assert "busy" in res.stderr.lower(), res.stderr
    assert queue_tcs(g) == {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3}
    assert dcb_show(g, "ets")["prio_tc"] == [0, 1, 2, 3, 0, 0, 0, 0]


def test_ethtool_channels_at_or_above_the_classes_repartitions(lab, undo):
    g = lab.h1
    g.run(["dcb", "ets", "set", "dev", "eth0", "prio-tc", "0:0", "1:1",
           "2:2", "3:3", "4:0", "5:0", "6:0", "7:0"])
    assert _channels(g, undo, 6).rc == 0
    # 6 queues over 4 classes: the first two classes take one more.
    assert queue_tcs(g) == {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 3}
    assert _channels(g, undo, 4).rc == 0
    assert queue_tcs(g) == {0: 0, 1: 1, 2: 2, 3: 3}
    assert _channels(g, undo, 8).rc == 0
    assert queue_tcs(g) == {q: q // 2 for q in range(8)}
    assert dcb_show(g, "ets")["prio_tc"] == [0, 1, 2, 3, 0, 0, 0, 0]


def _xps(guest, dev="eth0"):
    """{queue: CPU mask} of the device's TX queues' XPS (0: none)."""
    out = guest.run(["sh", "-c", f"cd /sys/class/net/{dev}/queues && "
                     "for q in tx-*; do echo $q $(cat $q/xps_cpus); "
                     "done"]).stdout
    return {int(q[3:]): int(m.replace(",", ""), 16)
            for q, m in (line.split() for line in out.splitlines())}


def test_a_partition_keeps_virtios_xps(lab, undo):
    """netdev_set_num_tc() and netdev_set_tc_queue() clear XPS; the driver
    sets virtio's again (each queue's CPU of its affinity), after an ETS
    set and after ethtool -L."""
    g = lab.h1
    virtio = _xps(g)
    assert all(virtio.values()), virtio
    g.run(["dcb", "ets", "set", "dev", "eth0", "prio-tc", "0:0", "1:1",
           "2:2", "3:3", "4:0", "5:0", "6:0", "7:0"])
    assert queue_tcs(g) == {q: q // 2 for q in range(8)}
    assert _xps(g) == virtio
    assert _channels(g, undo, 6).rc == 0
    after = _xps(g)
    assert all(after[q] for q in range(6)), after
    assert _channels(g, undo, 8).rc == 0
    assert _xps(g) == virtio


def test_an_unchanged_ets_map_leaves_the_queues_alone(lab):
    """lldpad sets ETS on every LLDPDU: a set whose map is the partition in
    effect does not re-partition (an XPS mask written by hand survives it),
    a new map does (virtio's XPS back)."""
    g = lab.h1
    four = ["prio-tc", "0:0", "1:1", "2:2", "3:3", "4:0", "5:0", "6:0",
            "7:0"]
    g.run(["dcb", "ets", "set", "dev", "eth0", *four])
    virtio = _xps(g)
    g.run(["sh", "-c", "echo 3 > /sys/class/net/eth0/queues/tx-0/xps_cpus"])
    assert _xps(g)[0] == 3
    g.run(["dcb", "ets", "set", "dev", "eth0", *four, "tc-tsa", "0:ets",
           "1:ets", "tc-bw", "0:50", "1:50"])
    assert _xps(g)[0] == 3
    g.run(["dcb", "ets", "set", "dev", "eth0", "prio-tc", "0:0", "1:1",
           "2:1", "3:1", "4:0", "5:0", "6:0", "7:0"])
    assert _xps(g) == virtio


def _mqprio(guest, undo, *args):
    guest.run(["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:",
               "mqprio", *args, "hw", "0"])
    undo.callback(guest.run, ["tc", "qdisc", "del", "dev", "eth0", "root"],
                  check=False)


def test_an_mqprio_partition_is_reported_and_kept(lab, undo):
    """An mqprio qdisc sets the TX queue layout too. getets reports the map
    in effect; a map of several classes is EBUSY while mqprio's partition
    holds, a map of one class is taken and leaves the partition alone (also
    when the driver's partition was there before mqprio); with mqprio
    gone, the driver partitions again."""
    g = lab.h1
    g.run(["dcb", "ets", "set", "dev", "eth0", "prio-tc", "0:0", "1:1",
           "2:2", "3:3", "4:0", "5:0", "6:0", "7:0"])
    _mqprio(g, undo, "num_tc", "2", "map", "0", "0", "0", "1", "1", "1",
            "1", "1", "queues", "4@0", "4@4")
    mq = {q: q // 4 for q in range(8)}
    assert queue_tcs(g) == mq
    assert dcb_show(g, "ets")["prio_tc"] == [0, 0, 0, 1, 1, 1, 1, 1]
    assert dcbnl_raw(g, "eth0", "ets", ets_bytes(**_VALID)) == "EBUSY"
    assert queue_tcs(g) == mq
    assert dcbnl_raw(g, "eth0", "ets", ets_bytes(bw=(0,) * 8)) == ""
    assert queue_tcs(g) == mq
    assert dcb_show(g, "ets")["prio_tc"] == [0, 0, 0, 1, 1, 1, 1, 1]
    g.run(["tc", "qdisc", "del", "dev", "eth0", "root"])
    assert dcb_show(g, "ets")["prio_tc"] == [0] * 8
    assert dcbnl_raw(g, "eth0", "ets", ets_bytes(**_VALID)) == ""
    assert queue_tcs(g) == {q: q // 2 for q in range(8)}


def test_an_mqprio_equal_to_the_drivers_partition_is_still_mqprios(
        lab, undo):
    """mqprio in software mode tells the driver nothing; the driver looks
    the root qdisc up. An mqprio whose layout equals the driver's
    partition is mqprio's: a map of three classes is EBUSY, one of one
    class leaves mqprio's two classes as they are."""
    g = lab.h1
    g.run(["dcb", "ets", "set", "dev", "eth0", "prio-tc", "all:0", "3:1"])
    assert queue_tcs(g) == {q: q // 4 for q in range(8)}
    _mqprio(g, undo, "num_tc", "2", "map", "0", "0", "0", "1", "0", "0",
            "0", "0", "queues", "4@0", "4@4")
    three = dict(_VALID, prio_tc=(0, 1, 2, 0, 0, 0, 0, 0))
    assert dcbnl_raw(g, "eth0", "ets", ets_bytes(**three)) == "EBUSY"
    assert dcbnl_raw(g, "eth0", "ets", ets_bytes(bw=(0,) * 8)) == ""
    assert queue_tcs(g) == {q: q // 4 for q in range(8)}
    qdisc = g.run(["tc", "qdisc", "show", "dev", "eth0", "root"]).stdout
    assert "tc 2 map 0 0 0 1 0 0 0 0" in qdisc, qdisc


def test_priorities_8_to_15_go_to_tc_0(lab, undo):
    """mqprio's 16-entry map puts priorities 8-15 in TC 3; deleting it
    leaves those entries (netdev_set_num_tc(dev, 0) keeps prio_tc_map).
    The driver writes all 16: a socket at SO_PRIORITY 9 then sends
    through TC 0's queues, not TC 3's."""
    g = lab.h1
    _mqprio(g, undo, "num_tc", "4", "map", *["0"] * 8, *["3"] * 8,
            "queues", "2@0", "2@2", "2@4", "2@6")
    g.run(["tc", "qdisc", "del", "dev", "eth0", "root"])
    g.run(["dcb", "ets", "set", "dev", "eth0", "prio-tc", "0:0", "1:1",
           "2:2", "3:3", "4:0", "5:0", "6:0", "7:0"])
    dst = lab.topology.address("h2", None, "ipv4")
    # Resolved first: while ARP is pending the kernel queues only a few
    # frames and drops the rest.
    g.run(["ping", "-c", "1", "-W", "2", dst])
    queues = TxQueueCounter(g)
    send(g, dst, count=200, so_priority=9)
    delta = queues.delta()
    assert delta[0] + delta[1] >= 200, delta
    assert sum(delta[q] for q in range(6, 8)) == 0, delta


def test_one_class_map_leaves_the_queues_unpartitioned(lab):
    g = lab.h1
    g.run(["dcb", "ets", "set", "dev", "eth0", "prio-tc", "all:1"])
    assert set(queue_tcs(g).values()) == {0, 1}
    g.run(["dcb", "ets", "set", "dev", "eth0", "prio-tc", "all:0"])
    assert set(queue_tcs(g).values()) == {0}
    assert "num_tc" not in g.run(["tc", "qdisc", "show", "dev",
                                  "eth0"]).stdout
