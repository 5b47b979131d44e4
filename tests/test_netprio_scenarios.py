"""net_prio end to end: cgroup priority on h1 -> TC on h1, PCP on h2.

Every scenario runs on the baseline of two-hosts (eth0.100 with identity
egress-qos-map, so skb priority N leaves as PCP N) plus the traffic-class
baseline of the `classes` fixture: mqprio with 8 TCs on h1's eth0 (priority
N -> TC N, one queue each) and flower vlan_prio counters on h2's eth0.
Expected counts come from each scenario's own parameters.
"""

import pytest

from dcblab.core import flavour
from dcblab.scenarios import (LINK, RECEIVER, SENDER, Drop, FlowResult,
                              TwoCgroupsResult, two_cgroups_at_once)
from dcblab.testing import (NETCLS, NETPRIO, QueueCounter, Sink, TraceCounter,
                            cgroup, flow_of, map_priority, pcap, pcp_counts,
                            pcp_packets, send, traffic_classes)

VID = 100
VLAN_DEV = f"eth0.{VID}"


@pytest.fixture
def classes(lab):
    traffic_classes(lab.h1, lab.h2, _dst(lab), VID)
    return lab


def _dst(lab, family="ipv4"):
    return lab.topology.address("h2", VID, family)


def _cgwrite(guest, path, value):
    """A write that may be refused: the Result, with the errno's name."""
    return guest.run(["cgwrite", path, value], check=False)


# --- 1: prioidx ---------------------------------------------------------------

def test_each_new_cgroup_gets_a_distinct_prioidx_and_root_has_1(lab):
    root = int(lab.h1.read(f"{NETPRIO}/net_prio.prioidx"))
    # The kernel's css ids start at 1 for the root of each hierarchy.
    assert root == 1
    ids = [cgroup(lab.h1, NETPRIO, f"idx{i}")[1] for i in range(4)]
    ids.append(cgroup(lab.h1, NETPRIO, "idx0/nested")[1])
    assert len(set(ids)) == len(ids)
    assert root not in ids


# --- 2: ifpriomap parsing -----------------------------------------------------

def test_ifpriomap_line_sets_priority_for_that_device_only(lab):
    path, _ = cgroup(lab.h1, NETPRIO, "map")
    map_priority(lab.h1, path, VLAN_DEV, 5)
    rows = dict(line.split() for line in
                lab.h1.read(f"{path}/net_prio.ifpriomap").splitlines())
    assert rows[VLAN_DEV] == "5"
    assert rows["eth0"] == "0" and rows["lo"] == "0"


@pytest.mark.parametrize("line", [VLAN_DEV, f"{VLAN_DEV} five", "\n", " 5",
                                  f"{VLAN_DEV} -1"],
                         ids=["no-priority", "word", "newline", "no-device",
                              "negative"])
def test_malformed_ifpriomap_line_is_einval(lab, line):
    path, _ = cgroup(lab.h1, NETPRIO, "bad")
    res = _cgwrite(lab.h1, f"{path}/net_prio.ifpriomap", line)
    assert res.rc == 1
    assert "EINVAL" in res.stderr, res.stderr


def test_ifpriomap_for_unknown_device_is_enodev(lab):
    path, _ = cgroup(lab.h1, NETPRIO, "nodev")
    res = _cgwrite(lab.h1, f"{path}/net_prio.ifpriomap", "nosuch0 3")
    assert res.rc == 1
    assert "ENODEV" in res.stderr, res.stderr


def test_device_created_after_map_was_written_starts_at_0(lab):
    path, _ = cgroup(lab.h1, NETPRIO, "later")
    map_priority(lab.h1, path, VLAN_DEV, 6)
    lab.h1.run(["ip", "link", "add", "late0", "type", "dummy"])
    rows = lab.h1.read(f"{path}/net_prio.ifpriomap").splitlines()
    assert "late0 0" in rows and f"{VLAN_DEV} 6" in rows


# --- 3: two cgroups at once ---------------------------------------------------

def test_two_cgroups_sending_at_once_keep_their_pcp_and_tc(lab):
    """The scenario of `dcblab demo` (dcblab.scenarios): every frame of each
    cgroup leaves by its TC's queue, is traced as mapped, and arrives with
    its PCP, by priosink and by flower alike. The guests' kernels lose
    none: a frame may only be lost where the host emulates the wire, and
    then the netns taps' own counters hold every one of them. (Seen once
    in CI: 554 of 10^5 missing at ~6 000 frames/s with no counter in
    either guest moving, most likely the receiver's tap queue while its
    QEMU was descheduled; that run's report did not read the taps.)"""
    # 10^5 frames on the lab kernel; the debug kernel runs the same paths
    # 10^4 times (10^5 took ~110 s of the debug pass there, and starved
    # guests dropped frames on a loaded host).
    per_flow = 5_000 if flavour().name == "debug" else 50_000
    prios = {1: 2, 2: 5}
    res = two_cgroups_at_once(lab, prios, per_flow, vlan=VID)
    print("\n".join(res.explain_loss()) or "no frame lost")
    sender, link, receiver = res.stages
    ns = f"{lab.wire.netns}:"
    host = [d for d in link.drops if d.counter.startswith(ns)]
    assert sender.missing == 0 and receiver.missing == 0, res.loss_reason()
    assert link.missing == sum(d.frames for d in host), res.loss_reason()
    # (a sender's ENOBUFS, which priosend retries, is no loss)
    assert not [d for d in link.drops if d.frames and d not in host], \
        res.loss_reason()
    for f in res.flows:
        # Other TCs may carry the guests' own ARP/ND: only the flows' count.
        assert res.tc_tx[f.prio] == per_flow
        assert (f.sent, f.duplicates) == (per_flow, 0)
        assert res.flower_rx[f.prio] == f.received
        assert f.pcp_rx == {prios[f.flow]: f.received}  # 0 misclassified
        assert f.misclassified == 0
        assert f.traced == per_flow                    # tracepoint agrees


def test_lost_frames_are_put_on_the_drop_counter_of_their_stage():
    """The scenario's loss accounting, from data (no lab): frames missing
    between the sender's queues and the receiver's flower counters are put
    on the link counter that moved, a remainder no counter explains is said
    as such, and the rate leaves the sink's idle wait out."""
    per_flow, tap_drops, silent = 1000, 30, 5
    lost = tap_drops + silent
    prios = {1: 2, 2: 5}
    flows = tuple(FlowResult(
        flow=f, cgroup=f"{NETPRIO}/flow{f}", prio=p, map=f"{VLAN_DEV} {p}",
        sent=per_flow, received=per_flow - (lost if f == 1 else 0),
        duplicates=0, pcp_rx={p: per_flow - (lost if f == 1 else 0)},
        traced=per_flow, wire_pcp={}) for f, p in prios.items())
    drops = (Drop(SENDER, "h1: qdisc drops on eth0", 0, "queues full"),
             Drop(LINK, "ns: tap h2-eth0 TX dropped", tap_drops, "h2 slow"),
             Drop(RECEIVER, "h2: priosink socket drops", 0, "sink slow"))
    send_s, receive_s, wall_s = 1.0, 2.0, 7.0
    res = TwoCgroupsResult(
        sender="h1", receiver="h2", vlan_dev=VLAN_DEV, flows=flows,
        tc_tx={p: per_flow for p in prios.values()},
        flower_rx={2: per_flow - lost, 5: per_flow}, drops=drops,
        send_seconds=send_s, receive_seconds=receive_s, wall_seconds=wall_s)

    assert (res.sent, res.lost) == (2 * per_flow, lost)
    assert [(s.missing, s.counted) for s in res.stages] == \
        [(0, 0), (lost, tap_drops), (0, 0)]
    reason = res.loss_reason()
    assert f"{tap_drops} ns: tap h2-eth0 TX dropped (h2 slow)" in reason
    assert f"{silent} lost in " in reason and "no drop counter" in reason
    assert "qdisc" not in reason and "socket" not in reason
    assert res.rate == res.classified / receive_s


# --- 4: SO_PRIORITY -----------------------------------------------------------

def test_so_priority_set_by_the_application_overrides_cgroup_priority(
        classes):
    lab = classes
    count, cg_prio, so_prio = 2000, 2, 6
    path, idx = cgroup(lab.h1, NETPRIO, "so")
    map_priority(lab.h1, path, VLAN_DEV, cg_prio)
    # Only eth0.100's decisions: eth0 may have a map too (any earlier
    # nonzero ifpriomap entry allocates one, and it is never freed).
    skipped = TraceCounter(lab.h1, "so", f'name == "{VLAN_DEV}" && '
                           f"prioidx == {idx} && applied == 0 && "
                           f"old_priority == {so_prio}")
    sink = Sink(lab.h2, "eth0", count=count, timeout=60, idle=3)
    send(lab.h1, _dst(lab), count=count, cgroup=path, so_priority=so_prio)
    f = flow_of(sink.result(), 1)
    assert pcp_counts(f) == {so_prio: count}
    assert pcp_packets(lab.h2, "eth0")[so_prio] == count
    assert skipped.count() == count


# --- 5: hierarchy -------------------------------------------------------------

def test_child_inherits_parent_map_at_creation_but_not_later_changes(classes):
    lab = classes
    count, first, second = 500, 3, 4
    parent, _ = cgroup(lab.h1, NETPRIO, "parent")
    map_priority(lab.h1, parent, VLAN_DEV, first)
    child, _ = cgroup(lab.h1, NETPRIO, "parent/child")
    assert f"{VLAN_DEV} {first}" in \
        lab.h1.read(f"{child}/net_prio.ifpriomap").splitlines()
    map_priority(lab.h1, parent, VLAN_DEV, second)
    assert f"{VLAN_DEV} {first}" in \
        lab.h1.read(f"{child}/net_prio.ifpriomap").splitlines()

    sink = Sink(lab.h2, "eth0", count=2 * count, timeout=60, idle=3)
    send(lab.h1, _dst(lab), count=count, flow=1, cgroup=child)
    send(lab.h1, _dst(lab), count=count, flow=2, cgroup=parent)
    got = sink.result()
    assert pcp_counts(flow_of(got, 1)) == {first: count}
    assert pcp_counts(flow_of(got, 2)) == {second: count}


# --- 6: moving mid-stream -----------------------------------------------------

def test_moving_a_process_mid_stream_retags_its_open_socket(classes):
    """net_prio_attach() rewrites the prioidx of every socket the moved
    process holds, so the PCP switches at the move, and so does the mqprio
    TC with kernel-patches/0004. (Stock 6.1: the connected UDP socket
    cached its TX queue, sk_tx_queue_mapping, with the first frame, and
    netdev_pick_tx() kept it, so every frame stayed in the first TC.)"""
    lab = classes
    count, before, after = 4000, 2, 5
    a, _ = cgroup(lab.h1, NETPRIO, "before")
    b, _ = cgroup(lab.h1, NETPRIO, "after")
    for path, prio in ((a, before), (b, after)):
        map_priority(lab.h1, path, VLAN_DEV, prio)
    queues = QueueCounter(lab.h1, "eth0")
    sink = Sink(lab.h2, "eth0", count=count, timeout=60, idle=3)
    sent = send(lab.h1, _dst(lab), count=count, cgroup=a, move_to=b,
                move_after=count // 2)
    assert sent["moved_at"] == count // 2
    f = flow_of(sink.result(), 1)
    assert pcp_counts(f) == {before: count // 2, after: count // 2}
    assert (f["lost"], f["reordered"]) == (0, 0)
    delta = queues.delta()
    assert delta[before] == count // 2
    assert delta[after] == count // 2


# --- 7: lower device vs VLAN device -------------------------------------------

@pytest.mark.parametrize(
    "maps, wire_pcp, tc",
    [
        # Only the lower device mapped: the VLAN device tags first (its
        # skb->priority is still 0), eth0's map then picks the TC.
        ({"eth0": 6}, 0, 6),
        # Only the VLAN device mapped: tag and TC both follow it.
        ({VLAN_DEV: 3}, 3, 3),
        # Both: the VLAN device decides; on eth0 the priority is already
        # set, so skb_update_prio() leaves it alone.
        ({VLAN_DEV: 3, "eth0": 6}, 3, 3),
    ],
    ids=["lower-only", "vlan-only", "both"])
def test_which_device_map_decides_pcp_and_tc(classes, undo, tmp_path, maps,
                                             wire_pcp, tc):
    lab = classes
    count = 200
    path, _ = cgroup(lab.h1, NETPRIO, "which")
    for dev, prio in maps.items():
        map_priority(lab.h1, path, dev, prio)
    h1nic = lab.topology.host("h1").nics[0]
    pcap_file = tmp_path / "l1.pcap"
    cap = lab.wire.capture(h1nic, pcap_file, count,
                           ["vlan", str(VID), "and", "udp", "port", "9000"])
    undo.callback(lambda: cap.poll() is None and cap.kill())
    queues = QueueCounter(lab.h1, "eth0")
    sink = Sink(lab.h2, "eth0", count=count, timeout=60, idle=3)
    send(lab.h1, _dst(lab), count=count, cgroup=path)
    got = flow_of(sink.result(), 1)
    cap.wait(timeout=20)

    tags = [pcap.vlan_tag(fr) for fr in pcap.read_frames(pcap_file)]
    assert tags == [(VID, wire_pcp, 0x0800)] * count
    assert pcp_counts(got) == {wire_pcp: count}
    assert queues.delta()[tc] == count


# --- 8: network namespaces ------------------------------------------------------

def test_ifpriomap_sees_only_devices_of_the_initial_netns(lab):
    """net_prio resolves names with dev_get_by_name(&init_net, ...) and
    lists init_net's devices only: a device moved into another netns can
    neither be mapped nor be seen, until it comes back."""
    h1 = lab.h1
    path, _ = cgroup(h1, NETPRIO, "netns")
    h1.run(["ip", "netns", "add", "ns1"])
    h1.run(["ip", "link", "add", "vx0", "type", "veth", "peer", "name", "vx1"])
    h1.run(["ip", "link", "set", "vx1", "netns", "ns1"])
    res = _cgwrite(h1, f"{path}/net_prio.ifpriomap", "vx1 4")
    assert res.rc == 1 and "ENODEV" in res.stderr, res.stderr
    devs = [line.split()[0] for line in
            h1.read(f"{path}/net_prio.ifpriomap").splitlines()]
    assert "vx0" in devs and "vx1" not in devs
    # Read by a process inside ns1, the file still lists init_net's
    # devices. (nsenter, not `ip netns exec`: that mounts a fresh /sys and
    # hides the cgroup hierarchies.)
    inside = h1.run(["nsenter", "--net=/run/netns/ns1", "cat",
                     f"{path}/net_prio.ifpriomap"]).stdout.split()
    assert "vx0" in inside and "vx1" not in inside

    h1.run(["ip", "-n", "ns1", "link", "set", "vx1", "netns", "1"])
    map_priority(h1, path, "vx1", 4)


# --- 9: net_cls beside net_prio -------------------------------------------------

def test_net_cls_classid_with_cls_cgroup_steers_like_net_prio(classes):
    """Same traffic, two controllers: flow 1 from a net_prio cgroup mapped
    to priority 2; flow 2 from a net_cls cgroup whose classid a cls_cgroup
    filter on eth0.100 egress turns into priority 5 (skbedit). Both land in
    their TC and PCP. A process in both cgroups (flow 3) gets the filter's
    priority: tc egress runs after skb_update_prio()."""
    lab = classes
    count, prio_np, prio_cls = 1000, 2, 5
    np_path, _ = cgroup(lab.h1, NETPRIO, "np")
    map_priority(lab.h1, np_path, VLAN_DEV, prio_np)
    cls_path, _ = cgroup(lab.h1, NETCLS, "cls")
    lab.h1.write(f"{cls_path}/net_cls.classid", "0x100001")
    lab.h1.run(["tc", "qdisc", "add", "dev", VLAN_DEV, "clsact"])
    # cls_cgroup takes a handle; it matches any skb whose socket has a
    # non-zero classid.
    lab.h1.run(["tc", "filter", "add", "dev", VLAN_DEV, "egress", "pref",
                "1", "handle", "1", "cgroup", "action", "skbedit",
                "priority", str(prio_cls)])
    queues = QueueCounter(lab.h1, "eth0")
    sink = Sink(lab.h2, "eth0", count=3 * count, timeout=60, idle=3)
    send(lab.h1, _dst(lab), count=count, flow=1, cgroup=np_path)
    send(lab.h1, _dst(lab), count=count, flow=2, cgroup=cls_path)
    # One process in both hierarchies: joining net_cls needs its own pid.
    lab.h1.run(["sh", "-c", f"echo $$ > {cls_path}/cgroup.procs && exec "
                f"priosend -j --count {count} --flow 3 --cgroup {np_path} "
                f"{_dst(lab)}"])
    got = sink.result()
    assert pcp_counts(flow_of(got, 1)) == {prio_np: count}
    assert pcp_counts(flow_of(got, 2)) == {prio_cls: count}
    assert pcp_counts(flow_of(got, 3)) == {prio_cls: count}
    delta = queues.delta()
    assert delta[prio_np] == count
    assert delta[prio_cls] == 2 * count
