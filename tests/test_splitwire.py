"""The plan of a lab split across machines (dcblab/lab/splitwire.py),
without a machine: which taps, VXLAN devices and joins each machine gets,
the VNIs, the underlay check and teardown's errors, with the commands
recorded by a fake shell. tests/test_fabric_split.py runs them for real."""

import json
import subprocess

import pytest

from dcblab.core.cmd import CmdError
from dcblab.core.paths import ROOT
from dcblab.lab.runs import LabError
from dcblab.lab.splitwire import (MachineWire, check_underlays,
                                  remote_teardown, vnis)
from dcblab.topology import load

SPLIT = ROOT / "topology" / "dcb-fabric-split.toml"


class FakeShell:
    """Records argv; answers `ip -j link show dev X` with an MTU; fails
    every command when told to."""

    remote = True

    def __init__(self, name, mtu=9000, fail=False):
        self.name, self.dest, self.mtu, self.fail = name, name, mtu, fail
        self.ran = []

    def run(self, argv, check=True, **kw):
        self.ran.append(list(argv))
        if self.fail:
            raise CmdError(argv, 255, "", "ssh: connect to host b: "
                           "Connection refused", where=f"machine {self.name}")
        out = ""
        if argv[:3] == ["ip", "-j", "link"]:
            out = json.dumps([{"ifname": argv[-1], "mtu": self.mtu}])
        return subprocess.CompletedProcess(argv, 0, out, "")


def test_vnis_are_the_files_else_made_from_lab_and_link_names():
    topo = load(SPLIT)
    got = vnis(topo, "lab1")
    assert set(got) == {"l1", "l2"}
    assert len(set(got.values())) == 2
    assert all(1 <= v <= 0xfffffe for v in got.values())
    assert vnis(topo, "lab1") == got
    assert vnis(topo, "lab2") != got


def _joins(cmds):
    """(from, to) of every mirred filter."""
    return {(c[4], c[-1]) for c in cmds if "mirred" in c}


def test_each_machine_gets_its_taps_and_vxlan_joins_only():
    topo = load(SPLIT)
    a = MachineWire(topo, "lab1", "r1", "a", FakeShell("a"))
    b = MachineWire(topo, "lab1", "r1", "b", FakeShell("b"))
    assert sorted(a.taps()) == ["h1-eth0", "h2-eth0"]
    assert sorted(b.taps()) == ["h3-eth0", "sw-swp1", "sw-swp2", "sw-swp3"]
    assert _joins(a.link_commands()) == {
        ("h1-eth0", "vx-l1"), ("vx-l1", "h1-eth0"),
        ("h2-eth0", "vx-l2"), ("vx-l2", "h2-eth0")}
    assert _joins(b.link_commands()) == {
        ("sw-swp1", "vx-l1"), ("vx-l1", "sw-swp1"),
        ("sw-swp2", "vx-l2"), ("vx-l2", "sw-swp2"),
        ("sw-swp3", "h3-eth0"), ("h3-eth0", "sw-swp3")}
    # 8 queues on every tap, as on one machine.
    adds = [c for c in b.link_commands() if c[:3] == ["ip", "tuntap", "add"]]
    assert len(adds) == 4 and all("multi_queue" in c for c in adds)


def test_a_vxlan_device_is_made_in_the_machines_namespace_then_moved():
    topo = load(SPLIT)
    shell = FakeShell("a")
    a = MachineWire(topo, "lab1", "0123456789ab", "a", shell)
    a._vxlans()
    vni = vnis(topo, "lab1")
    add, move = shell.ran[0], shell.ran[1]
    assert add[:3] == ["ip", "link", "add"] and add[3] == "dx01234567-0"
    assert add[add.index("id") + 1] == str(vni["l1"])
    assert (add[add.index("local") + 1], add[add.index("remote") + 1],
            add[add.index("dstport") + 1], add[add.index("dev") + 1]) == \
        ("198.18.0.1", "198.18.0.2", "4789", "dc0")
    assert move == ["ip", "link", "set", "dx01234567-0", "netns", a.netns]


def test_up_refuses_an_underlay_mtu_too_small_for_a_tagged_frame():
    topo = load(SPLIT)
    with pytest.raises(LabError) as e:
        check_underlays(topo, {"a": FakeShell("a", 9000),
                               "b": FakeShell("b", 1553)})
    assert str(e.value).startswith(
        "machine b: underlay dc0 has MTU 1553, a cross-machine link needs "
        "1554")
    check_underlays(topo, {"a": FakeShell("a", 1554),
                           "b": FakeShell("b", 1554)})


def test_teardown_tries_every_machine_and_names_the_unreachable_one(
        monkeypatch):
    topo = load(SPLIT)
    shells = {"a": FakeShell("a"), "b": FakeShell("b", fail=True)}
    monkeypatch.setattr("dcblab.lab.splitwire.shells",
                        lambda *a, **k: shells)
    with pytest.raises(LabError) as e:
        remote_teardown(topo, "lab1", "r1")
    assert str(e.value) == ("machine b (b): ssh: connect to host b: "
                            "Connection refused: its part is left there")
    # a's part went: its processes, devices, table and run directory.
    assert any("pkill" in " ".join(c) for c in shells["a"].ran)
    assert any("umount" in " ".join(c) for c in shells["a"].ran)
