"""The two-VM lab itself: wire, queues, PCP across the wire, CLI, cleanup."""

import json
import os
import re
import subprocess
import sys

import pytest

from dcblab.core.paths import ROOT
from dcblab.lab import Lab, leftovers, netns_exists, run_root
from dcblab.lab.baseline import restore
from dcblab.testing import pcap

DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]
NETPRIO = "/sys/fs/cgroup/net_prio"


def _nic(lab, host, name="eth0"):
    return next(n for n in lab.topology.host(host).nics if n.name == name)


def _ping(guest, dst, count=3, six=False):
    argv = ["ping", "-6" if six else "-4", "-c", str(count), "-i", "0.05",
            "-W", "2", dst]
    res = guest.run(argv, check=False)
    m = re.search(r"(\d+) packets received", res.stdout)
    return int(m.group(1)) if m else 0, res


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_h1_pings_h2_over_eth0(lab, family):
    dst = lab.topology.address("h2", family=family)
    got, res = _ping(lab.h1, dst, six=family == "ipv6")
    assert got == 3, res.stdout + res.stderr


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_h1_pings_h2_over_vlan_device(lab, family):
    vid = _nic(lab, "h2").vlans[0].id
    got, res = _ping(lab.h1, lab.topology.address("h2", vid, family),
                     six=family == "ipv6")
    assert got == 3, res.stdout + res.stderr


@pytest.mark.parametrize("host", ["h1", "h2"])
def test_each_side_has_all_queue_pairs_of_the_link_enabled(lab, host):
    queues = _nic(lab, host).queues
    guest = getattr(lab, host)
    tx = guest.run(["ls", "/sys/class/net/eth0/queues"]).stdout.split()
    assert len([q for q in tx if q.startswith("tx-")]) == queues
    channels = guest.run(["ethtool", "-l", "eth0"]).stdout
    current = channels.split("Current hardware settings:")[1]
    assert f"Combined:\t{queues}" in current, channels


def test_pcp_5_frame_on_vlan_crosses_the_wire_with_pcp_5(lab, undo, tmp_path):
    """A frame from a cgroup mapped to priority 5 on eth0.100 leaves h1
    tagged PCP 5 (identity egress-qos-map), is recorded on the host side
    of the link with PCP 5, and is counted on h2 by flower vlan_prio 5."""
    pcp, count = 5, 4
    h1nic = _nic(lab, "h1")
    vlan = h1nic.vlans[0]
    h2, dev1 = lab.h2, h1nic.vlan_dev(vlan)

    h2.run(["tc", "qdisc", "add", "dev", "eth0", "clsact"])
    h2.run(["tc", "filter", "add", "dev", "eth0", "ingress", "protocol",
            "802.1Q", "pref", "1", "flower", "vlan_id", str(vlan.id),
            "vlan_prio", str(pcp), "action", "pass"])
    cg = f"{NETPRIO}/wire-pcp"
    lab.h1.run(["mkdir", cg])
    lab.h1.write(f"{cg}/net_prio.ifpriomap", f"{dev1} {pcp}")

    pcap_file = tmp_path / "l1.pcap"
    cap = lab.wire.capture(h1nic, pcap_file, count,
                           ["vlan", str(vlan.id), "and", "icmp[icmptype] == 8"])
    undo.callback(lambda: cap.poll() is None and cap.kill())
    dst = lab.topology.address("h2", vlan.id)
    lab.h1.run(["sh", "-c", f"echo $$ > {cg}/cgroup.procs && exec ping -4 "
                f"-c {count} -i 0.05 -W 2 -q {dst}"])
    cap.wait(timeout=10)

    tags = [pcap.vlan_tag(f) for f in pcap.read_frames(pcap_file)]
    assert tags == [(vlan.id, pcp, 0x0800)] * count
    stats = json.loads(h2.run(["tc", "-s", "-j", "filter", "show", "dev",
                               "eth0", "ingress"]).stdout)
    hits = [f["options"]["actions"][0]["stats"]["packets"] for f in stats
            if f.get("options", {}).get("actions")]
    # Echo requests only reach h2's ingress; h2's replies leave it.
    assert hits == [count]


def test_two_labs_with_different_names_run_at_once(lab, tmp_path):
    other = Lab(lab.topology, name=f"second-{os.getpid()}")
    try:
        # Cold: a lab restored from the topology's snapshot has the MACs
        # of the lab that saved it (test_snapshots.py).
        other.up(owner_pid=os.getpid(), cold=True)
        assert netns_exists(lab.wire.netns) and \
            netns_exists(other.wire.netns)
        # Two namespaces, not one bound twice: their nsfs inodes differ.
        assert os.stat(other.wire.netns).st_ino != \
            os.stat(lab.wire.netns).st_ino
        nic = _nic(lab, "h1")
        assert other.wire.mac(nic) != lab.wire.mac(nic)
        dst = lab.topology.address("h2")
        for m in (other.machine("h1"), lab.h1):
            res = m.run(["ping", "-4", "-c", "2", "-i", "0.05", "-W", "2",
                         dst], check=False)
            assert "2 packets received" in res.stdout, res.stdout
    finally:
        other.down()
    assert leftovers(other.name, other.run_id) == []


BAD = ROOT / "tests" / "topology" / "bad"
# A few of the bad files (test_topology.py checks them all), through the
# CLI: exit 2, one line, nothing started.
CLI_BAD = ["link-unknown-host", "queues-17", "invalid-toml-value-missing"]


@pytest.mark.parametrize("case", CLI_BAD)
def test_bad_topology_is_one_line_error_exit_2_nothing_started(case,
                                                               monkeypatch):
    monkeypatch.chdir(ROOT)
    path = f"tests/topology/bad/{case}.toml"
    header = (BAD / f"{case}.toml").read_text().splitlines()[0]
    labs_before = _labs()
    r = subprocess.run(DCBLAB + ["up", path], capture_output=True,
                       text=True, timeout=30)
    assert (r.returncode, r.stderr) == \
        (2, f"dcblab: {header.removeprefix('# expect: ')}\n")
    assert _labs() == labs_before


def _labs():
    return set(run_root().iterdir()) if run_root().exists() else set()


def test_missing_topology_file_is_one_line_error_exit_2(tmp_path):
    path = tmp_path / "nope.toml"
    r = subprocess.run(DCBLAB + ["up", str(path)], capture_output=True,
                       text=True, timeout=30)
    assert (r.returncode, r.stderr) == (2, f"dcblab: {path}: no such file\n")



def test_restore_between_tests_removes_what_a_test_left(lab):
    h1 = lab.h1
    h1.run(["mkdir", "-p", f"{NETPRIO}/left/child"])
    h1.write(f"{NETPRIO}/net_prio.ifpriomap", "eth0 3")
    h1.run(["ip", "link", "add", "left0", "type", "dummy"])
    h1.run(["tc", "qdisc", "add", "dev", "eth0", "root", "prio"])
    h1.run(["tc", "qdisc", "add", "dev", "eth0.100", "clsact"])
    h1.run(["ip", "netns", "add", "left"])
    h1.run(["nft", "add", "table", "inet", "left"])
    # Traffic tools left running (found by name in /proc by the restore).
    h1.spawn(["priosink", "-i", "eth0", "-t", "300"])
    h1.spawn(["iperf3", "-s"])
    comms = "for p in /proc/[0-9]*; do read -r c < $p/comm && echo $c; done"
    running = h1.run(["sh", "-c", comms]).stdout.split()
    assert {"priosink", "iperf3"} <= set(running), running

    said = restore(h1.machine, lab.topology.host("h1"),
                   lab.topology.dcbx).stdout
    assert "restore: killed leftover priosend/priosink/dcbapp-netprio/" \
        "iperf3/perftest\n" in said, said
    assert "restore: deleted netns left\n" in said, said
    assert "restore: nftables ruleset flushed (tables inet left)\n" in \
        said, said
    assert "restore: qdisc prio at root of eth0 reset\n" in said, said
    assert "restore: clsact of eth0.100 removed\n" in said, said
    running = h1.run(["sh", "-c", comms]).stdout.split()
    assert not {"priosink", "iperf3"} & set(running), running
    assert h1.run(["ip", "netns", "list"]).stdout == ""

    assert h1.run(["find", NETPRIO, "-mindepth", "1", "-type", "d"]
                  ).stdout == ""
    assert "eth0 0" in h1.read(f"{NETPRIO}/net_prio.ifpriomap").splitlines()
    assert "left0" not in h1.run(["ls", "/sys/class/net"]).stdout.split()
    qdiscs = json.loads(h1.run(["tc", "-j", "qdisc", "show"]).stdout)
    kinds = {(q["dev"], q["kind"]) for q in qdiscs if q.get("root")}
    assert ("eth0", "mq") in kinds
    assert not [q for q in qdiscs if q["kind"] in ("prio", "clsact")]
    assert h1.run(["nft", "list", "tables"]).stdout == ""
    # What the baseline made stays.
    assert "eth0.100" in h1.run(["ls", "/sys/class/net"]).stdout.split()


def test_nldump_lists_qdiscs_and_tables_as_tc_and_nft_do(lab):
    """The restore reads the qdiscs and nftables tables with nldump
    (tools/nldump.c, static) instead of tc and nft: for qdiscs at the
    root, under a parent, on ingress, with handles of their own, and
    tables of the three families the lab kernel has, its lines are the
    first words of tc's and nft's own."""
    h1 = lab.h1
    for cmd in (["ip", "link", "add", "nld0", "type", "dummy"],
                ["tc", "qdisc", "add", "dev", "nld0", "root", "handle",
                 "1:", "prio"],
                ["tc", "qdisc", "add", "dev", "nld0", "parent", "1:2",
                 "handle", "8002:", "tbf", "rate", "1mbit", "burst",
                 "10k", "latency", "50ms"],
                ["tc", "qdisc", "add", "dev", "nld0", "ingress"],
                ["tc", "qdisc", "add", "dev", "eth0.100", "clsact"],
                ["nft", "add", "table", "inet", "t1"],
                ["nft", "add", "table", "ip", "t2"],
                ["nft", "add", "table", "ip6", "t3"]):
        h1.run(cmd)
    tc = [line for line in h1.run(["tc", "qdisc", "show"]).stdout
          .splitlines() if line.startswith("qdisc ")]
    ours = h1.run(["nldump", "qdiscs"]).stdout.splitlines()
    assert len(ours) == len(tc) and all(
        f"{t} ".startswith(f"{o} ") for o, t in zip(ours, tc)), (ours, tc)
    assert "qdisc tbf 8002: dev nld0 parent 1:2" in ours, ours
    assert "qdisc ingress ffff: dev nld0 parent ffff:fff1" in ours, ours
    assert "qdisc clsact ffff: dev eth0.100 parent ffff:fff1" in ours, ours
    tables = h1.run(["nldump", "nft-tables"]).stdout
    assert tables == h1.run(["nft", "list", "tables"]).stdout
    assert len(tables.splitlines()) == 3, tables


def test_restore_detaches_programs_from_the_v2_root(lab):
    # A program on the root, unlike one on a cgroup the restore removes,
    # would outlive the test and give later ones priorities.
    h1, root = lab.h1, "/sys/fs/cgroup/unified"
    assert h1.run(["cgsockprio", root, "5"]).rc == 0
    assert h1.run(["cgsockprio", "-e", root, "eth0.100", "5"]).rc == 0
    lab.restore()
    for args in (["-d", root], ["-d", "-e", root]):
        r = h1.run(["cgsockprio", *args], check=False)
        assert r.rc == 1 and "ENOENT" in r.stderr, (args, r.stderr)


def test_restore_makes_a_vlan_device_lost_with_its_namespace_again(lab):
    # A VLAN device moved into a namespace is destroyed, not given back
    # to init_net, when the restore deletes the namespace: the restore
    # then makes the baseline again, its address and QoS maps included.
    h1, host = lab.h1, lab.topology.host("h1")
    vlan = host.nics[0].vlans[0]
    dev = host.nics[0].vlan_dev(vlan)
    h1.run(["ip", "netns", "add", "gone"])
    h1.run(["ip", "link", "set", dev, "netns", "gone"])
    assert dev not in h1.run(["ls", "/sys/class/net"]).stdout.split()
    lab.restore()
    addrs = h1.run(["ip", "-br", "addr", "show", "dev", dev]).stdout
    assert f"{vlan.ipv4}" in addrs, addrs
    egress = h1.read(f"/proc/net/vlan/{dev}").split(
        "EGRESS priority mappings:")[1].split()
    assert {f"{a}:{b}" for a, b in vlan.egress_qos_map if b} <= \
        set(egress), egress
    assert "gone" not in h1.run(["ip", "netns"]).stdout


def test_restore_skips_a_guest_nobody_sent_a_command(lab):
    lab.restore()
    lab.h1.run(["true"])
    assert lab.restore() == ["h1"]
    assert lab.restore() == []
    # A command from another client of the keeper counts too.
    r = subprocess.run(DCBLAB + ["exec", "--name", lab.name, "h2", "--",
                                 "ip", "link", "add", "cli0", "type",
                                 "dummy"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert lab.restore() == ["h2"]
    assert "cli0" not in lab.h2.run(["ls", "/sys/class/net"]).stdout.split()
