"""The DCB fabric split across two machines (topology/dcb-fabric-split.toml,
docs/scale.md): h1 and h2 on machine a, sw and h3 on machine b, links l1
and l2 carried in VXLAN over the machines' underlay, l3 local to b. CI
has one machine, so the two are simulated on it (lab/simmachines.py):
each its own network and mount namespace, reached only by ssh, joined by
a veth as the data-centre network.

The fabric's own scenarios run here as written (imported from
test_fabric.py and test_pfc.py, with this module's ``fabric`` fixture):
the same PCPs, DCBX, ETS shares and PFC losslessness as on one machine.
The rest is what only a split lab has: each machine's part, the VXLAN
port's filter, a fault on the underlay, the MTU check, and teardown of
every part when one machine fails.
"""

import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from dcblab.core import proc
from dcblab.core.paths import ROOT
from dcblab.core.remote import SSH_CONFIG_ENV
from dcblab.lab import Lab
from dcblab.lab.runs import LabError, lab_dir
from dcblab.lab.simmachines import SimMachines
from dcblab.lab.splitwire import vnis
from dcblab.scenarios.fabric import congested_port
from dcblab.testing.guest import Guest
from dcblab.testing.plugin import FABRIC
from dcblab.testing.traffic import Sink, flow_of, send
from dcblab.topology import load

# The fabric's scenarios, collected here as well (with this module's
# fabric fixture).
from test_fabric import (
    test_ets_shares_at_the_congested_port_match_the_file,
    test_hosts_adopt_their_switch_ports_dcb_by_dcbx,
    test_lldp_ends_at_the_switch_each_host_sees_only_its_port,
    test_pcp_is_kept_from_h1_through_sw_to_h3_on_vlan_100)
from terminal import attached, console_shell
import test_pfc
from test_pfc import test_pfc_is_on_priority_3_at_both_ends_with_pfc_cap_8

__all__ = ["test_ets_shares_at_the_congested_port_match_the_file",
           "test_hosts_adopt_their_switch_ports_dcb_by_dcbx",
           "test_lldp_ends_at_the_switch_each_host_sees_only_its_port",
           "test_pcp_is_kept_from_h1_through_sw_to_h3_on_vlan_100",
           "test_pfc_is_on_priority_3_at_both_ends_with_pfc_cap_8"]

DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]
SPLIT = ROOT / "topology" / "dcb-fabric-split.toml"
PAIR = ROOT / "tests" / "data" / "pair-split.toml"
pytestmark = pytest.mark.topology(str(SPLIT))


@contextlib.contextmanager
def _simulated(name):
    """Machines a and b, DCBLAB_SSH_CONFIG naming them meanwhile (the
    labs brought up meanwhile reach them with it)."""
    old = os.environ.get(SSH_CONFIG_ENV)
    with SimMachines(("a", "b"), name=name) as s:
        os.environ[SSH_CONFIG_ENV] = str(s.ssh_config)
        try:
            yield s
        finally:
            if old is None:
                os.environ.pop(SSH_CONFIG_ENV, None)
            else:
                os.environ[SSH_CONFIG_ENV] = old


@pytest.fixture(scope="module")
def sim(dcblab_labs):
    """Machines a and b; the split lab goes down before they do. The
    session's dcb-fabric lab must not be up beside it: its four guests,
    idle, are load on the two CPUs the split lab's measurements share.
    With it up, in one CI run (2026-12-07, its idle guests still ticking
    at 250 Hz), the ETS share of priority 3 came out 0.446 and 0.425 of
    a 0.5 share here; alone, this file passed. The plugin runs this
    module after the fabric's last test, which takes that lab down
    (_item_topologies); if a run kept it up all the same, it goes down
    here."""
    if dcblab_labs.is_up(FABRIC):
        dcblab_labs.down(FABRIC)
    with _simulated("fsplit") as s:
        try:
            yield s
        finally:
            if dcblab_labs.is_up(SPLIT):
                dcblab_labs.down(SPLIT)


@pytest.fixture
def fabric(sim, dcblab_labs):
    return dcblab_labs.get(SPLIT)


@pytest.fixture(scope="module")
def port(sim, dcblab_labs):
    sw, port, rx = congested_port(dcblab_labs.get(SPLIT).topology)
    assert (sw.name, port.name, rx) == ("sw", "swp3", "h3")
    return port


def _links(sim, machine, lab):
    out = sim.run(machine, ["nsenter", f"--net={lab_dir(lab)}/netns",
                            "ip", "-d", "-j", "link", "show"]).stdout
    return {d["ifname"]: d for d in json.loads(out)}


def test_priority_3_is_lossless_while_0_and_2_drop(fabric):
    """test_pfc.py's lossless run at 1.2 x the port's rate (there also at
    2 x): every PCP-3 frame arrives, and sw's pause frames on swp1 and
    swp2, which reach h1 and h2 across the VXLAN links, equal the pause
    indications those hosts' drivers counted."""
    test_pfc.test_priority_3_is_lossless_while_0_and_2_drop(fabric, 1.2)


def test_each_machine_holds_its_hosts_taps_and_its_vxlan_links(sim, fabric):
    """a's lab namespace has h1's and h2's taps and the VXLAN devices of
    l1 and l2; b's has sw's three taps, h3's, and the same two VXLAN
    devices with the same VNIs, each toward the other's address."""
    want_vni = vnis(fabric.topology, fabric.name)
    a, b = _links(sim, "a", fabric.name), _links(sim, "b", fabric.name)
    assert {"h1-eth0", "h2-eth0", "vx-l1", "vx-l2"} <= set(a)
    assert not {"sw-swp1", "h3-eth0"} & set(a)
    assert {"sw-swp1", "sw-swp2", "sw-swp3", "h3-eth0", "vx-l1",
            "vx-l2"} <= set(b)
    assert "vx-l3" not in b and not {"h1-eth0", "h2-eth0"} & set(b)
    for links, me, peer in ((a, "198.18.0.1", "198.18.0.2"),
                            (b, "198.18.0.2", "198.18.0.1")):
        for link in ("l1", "l2"):
            vx = links[f"vx-{link}"]["linkinfo"]["info_data"]
            assert (vx["id"], vx["local"], vx["remote"], vx["port"]) == \
                (want_vni[link], me, peer, 4789)
    # No bridge anywhere on a lab link.
    assert not [n for n, d in {**a, **b}.items()
                if d.get("linkinfo", {}).get("info_kind") == "bridge"]


def test_guests_on_both_machines_have_their_eight_queues(fabric):
    for host in ("h1", "h3"):
        out = fabric.guest(host).run(["ethtool", "-l", "eth0"]).stdout
        current = out.split("Current hardware settings:")[1]
        assert "Combined:\t8" in current, (host, out)


def test_a_cable_pulled_on_a_cross_machine_link_takes_both_carriers(
        fabric):
    """`dcblab link l1 down` on the link from h1 (machine a) to sw
    (machine b): each end's NIC loses its carrier, set through its own
    machine's libvirtd; `up` gives both back, and a frame crosses again."""
    for action, carrier in (("down", "0"), ("up", "1")):
        r = _dcblab("link", "--name", fabric.name, "l1", action)
        assert r.returncode == 0, r.stderr
        for host, dev in (("h1", "eth0"), ("sw", "swp1")):
            got = fabric.guest(host).run(
                ["cat", f"/sys/class/net/{dev}/carrier"], check=False)
            assert (got.stdout.strip() or "0") == carrier, (host, got)
    fabric.h1.run(["ping", "-c", "1", "-W", "5",
                   fabric.topology.address("h3", vlan=100)])


def test_status_names_each_hosts_machine(sim, fabric):
    st = Lab.attach(fabric.name).state
    assert {h: e.get("machine") for h, e in st["hosts"].items()} == \
        {"h1": "a", "h2": "a", "h3": "b", "sw": "b"}
    assert set(st["machines"]) == {"a", "b"}
    assert all(i["uri"].startswith("qemu+ssh://") for i in
               st["machines"].values())


def _vxlan_frame(vni, dst_mac):
    """A VXLAN packet's UDP payload carrying one Ethernet frame to
    dst_mac (an LLDP-typed frame: no guest stack answers it)."""
    inner = bytes.fromhex(dst_mac.replace(":", "")) + \
        bytes.fromhex("02dc00000099") + struct.pack("!H", 0x88b5) + \
        b"dcblab-stranger".ljust(46, b"\0")
    return struct.pack("!II", 0x08000000, vni << 8) + inner


def test_the_vxlan_port_takes_the_labs_vnis_only_from_its_machines(
        sim, fabric):
    """A VXLAN packet of l1's VNI from an address of the data-centre
    network that is not machine a's is dropped on b by the lab's
    nftables rule (its counter), and never reaches sw's port; the same
    packet from a's address does."""
    vni = vnis(fabric.topology, fabric.name)["l1"]
    mac = fabric.wire.mac(fabric.topology.host("sw").nic("swp1"))
    table = f"dcblab_{Lab.attach(fabric.name).run_id}"

    def dropped():
        out = json.loads(sim.run("b", ["nft", "-j", "list", "table",
                                       "inet", table]).stdout)
        return sum(x["counter"]["packets"] for e in out["nftables"]
                   if "rule" in e for x in e["rule"]["expr"]
                   if "counter" in x)

    def rx(dev="swp1"):
        return int(fabric.sw.run(["cat", f"/sys/class/net/{dev}/statistics"
                                  "/rx_packets"]).stdout)

    payload = _vxlan_frame(vni, mac).hex()
    send_from = ("import socket,sys; s=socket.socket(2,2); "
                 "s.bind((sys.argv[1],0)); "
                 "[s.sendto(bytes.fromhex(sys.argv[2]),"
                 "('198.18.0.2',4789)) for _ in range(5)]")
    sim.run("a", ["ip", "addr", "add", "198.18.0.9/24", "dev", "dc0"])
    try:
        d0, r0 = dropped(), rx()
        sim.run("a", ["python3", "-c", send_from, "198.18.0.9", payload])
        d1, r1 = dropped(), rx()
        sim.run("a", ["python3", "-c", send_from, "198.18.0.1", payload])
        d2, r2 = dropped(), rx()
    finally:
        sim.run("a", ["ip", "addr", "del", "198.18.0.9/24", "dev", "dc0"])
    assert d1 - d0 == 5 and r1 - r0 < 5, (d0, d1, r0, r1)
    assert d2 == d1 and r2 - r1 >= 5, (d1, d2, r1, r2)


def test_a_fault_on_the_underlay_is_seen_by_priosink(sim, fabric):
    """A congested data-centre network: machine a's underlay shaped to
    200 kbit/s (a tbf; this host's kernel has no netem) drops what h1
    sends beyond it to h3 across l1, and priosink on h3 counts the gaps;
    the same flow on the free underlay arrives whole."""
    dst = fabric.topology.address("h3", vlan=100)

    def run(flow):
        sink = Sink(fabric.h3, "eth0", count=400, timeout=15)
        send(fabric.h1, dst, count=400, rate=400, size=512, flow=flow)
        return flow_of(sink.result(), flow)
    fabric.h1.run(["ping", "-c", "1", "-W", "2", dst])
    clean = run(11)
    sim.shape("a", "200kbit")
    try:
        lossy = run(12)
    finally:
        sim.clear_netem("a")
    assert clean["received"] == 400 and clean["lost"] == 0, clean
    assert lossy["lost"] > 0 and lossy["received"] < 400, \
        lossy


@pytest.fixture
def machines():
    """Two machines of their own for a test that brings up (or fails to
    bring up) a lab of its own: what is left on them is that lab's."""
    with _simulated("fpair") as s:
        yield s


def _left(sim):
    """What any lab left on machines a and b (empty: nothing): a run
    directory, a VXLAN device in the machine's namespace, an nftables
    table, a guest."""
    left = []
    for m in ("a", "b"):
        out = sim.run(m, ["sh", "-c", 'ls /run/dcblab | grep -v "^sim-"; '
                          'ip -o link show | grep -o " dx[0-9a-f]*-[0-9]*"; '
                          'nft list tables | grep dcblab_; '
                          'pgrep -af "dcblab[.]host="; true']).stdout
        left += [f"{m}: {x.strip()}" for x in out.split("\n") if x.strip()]
    return left


def _dcblab(*args, **kw):
    kw.setdefault("timeout", 120)
    return subprocess.run(DCBLAB + list(args), capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, **kw)


def test_cli_works_on_a_guest_on_either_machine_and_reap_clears_both(
        machines, tmp_path):
    """A split pair up from the command line: status names each host's
    machine, exec runs on h2 (machine b), capture records l1's tagged
    frames on machine a into a pcap here, the shell (its socket forwarded
    from b) answers. Then its keeper and guard are killed outright:
    `dcblab reap` removes every part on both machines and here, and a
    second reap finds nothing."""
    name = "pair-cli"
    r = _dcblab("up", "--name", name, str(PAIR), timeout=300)
    assert r.returncode == 0, r.stderr
    state = Lab.attach(name).state
    try:
        st = json.loads(_dcblab("status", "--name", name, "-j").stdout)[0]
        assert {h["host"]: h.get("machine") for h in st["hosts"]} == \
            {"h1": "a", "h2": "b"}
        assert all(h["state"] == "running" and h["uptime_s"] > 0
                   for h in st["hosts"])
        r = _dcblab("exec", "--name", name, "h2", "--", "hostname")
        assert r.stdout.strip() == "h2", r.stderr
        pcap = tmp_path / "l1.pcap"
        cap = subprocess.Popen(DCBLAB + ["capture", "--name", name, "l1",
                                         "-w", str(pcap), "-c", "100"],
                               stderr=subprocess.PIPE, text=True)
        dst = load(PAIR).address("h2", vlan=100)
        h1 = Guest(Lab.attach(name).machine("h1"))
        # tcpdump listening: its line precedes the capture's start.
        time.sleep(2)
        send(h1, dst, count=100, rate=100, flow=3, so_priority=3)
        cap.wait(60)
        out = subprocess.run(["tcpdump", "-r", str(pcap), "-e", "-n"],
                             capture_output=True, text=True).stdout
        assert out.count("vlan 100, p 3") >= 50, out
        with attached(SimpleNamespace(name=name), "shell", "h2") as sh:
            sh.expect(rb"root@h2")
            sh.send(b"echo $((6*7))\r")
            sh.expect(rb"42")
        # The serial console: `virsh console` over qemu+ssh.
        with attached(SimpleNamespace(name=name), "console", "h1") as con:
            console_shell(con)
    finally:
        for pid in (state["keeper_pid"], state["guard_pid"]):
            os.kill(pid, signal.SIGKILL)
    r = _dcblab("reap")
    assert r.returncode == 0, r.stderr
    assert f"machine b: run {state['run_id']} torn down" in r.stdout, \
        r.stdout
    assert _left(machines) == []
    assert not lab_dir(name).exists()
    assert proc.pids_with_tag(f"dcblab.run={state['run_id']}") == []
    r = _dcblab("reap")
    assert r.returncode == 0 and "0 run(s) reaped" in r.stdout, r.stdout


def test_up_is_refused_when_the_underlay_mtu_is_too_small(machines):
    """A 1500-byte underlay cannot carry a guest's tagged 1500-byte frame
    in VXLAN (1554 needed): `up` says so in one line, before anything is
    made on either machine."""
    machines.set_mtu(1500)
    with pytest.raises(LabError) as e:
        Lab(load(PAIR), "pair-mtu").up()
    msg = str(e.value)
    assert "underlay dc0 has MTU 1500" in msg and "needs 1554" in msg, msg
    assert _left(machines) == []
    assert not lab_dir("pair-mtu").exists()


def test_a_failing_machine_tears_down_every_part(machines):
    """Machine b refuses its part (a namespace of the lab's name is
    already there): `up` fails naming b, and machine a's part, made
    before, is gone too, as is b's."""
    d = str(lab_dir("pair-fail"))
    machines.run("b", ["sh", "-c", 'mkdir -p "$1" && touch "$1/netns" && '
                  'unshare --net="$1/netns" true', "sh", d])
    with pytest.raises(LabError) as e:
        Lab(load(PAIR), "pair-fail").up()
    assert "machine b" in str(e.value) and "already exists" in str(e.value)
    assert _left(machines) == []
    assert not lab_dir("pair-fail").exists()
