"""A lab split across machines: [machines.NAME], machine = on hosts and
switches, vni on links, vxlan_port (docs/topology.md, "Machines").

The mistakes are files under tests/topology/bad/, run by
tests/test_topology.py like every other bad file."""

import ipaddress
from dataclasses import replace
from pathlib import Path

import pytest

from dcblab.topology import Machine, TopologyError, load, parse

ROOT = Path(__file__).parent.parent
SPLIT = ROOT / "topology" / "dcb-fabric-split.toml"
FABRIC = ROOT / "topology" / "dcb-fabric.toml"

MACHINES = """\
[machines.a]
ssh = "root@192.0.2.10"
underlay = "eth1"
address = "198.18.0.1"
[machines.b]
ssh = "b"
underlay = "dc0"
address = "198.18.0.2"
network = "lab"
"""


def _lab(h1="", h2="", link="", top=""):
    """Two hosts, one link; h1 and h2 on the machines given."""
    def on(h, m):
        return f'[hosts.{h}]\nmachine = "{m}"\n' if m else ""
    return (f"{top}{MACHINES}{on('h1', h1)}[hosts.h1.nics.eth0]\n"
            f"{on('h2', h2)}[hosts.h2.nics.eth0]\n"
            f'[links.l1]\na = "h1:eth0"\nb = "h2:eth0"\n{link}')


# --- the split fabric --------------------------------------------------------

@pytest.fixture(scope="module")
def split():
    return load(SPLIT)


def test_split_fabric_puts_h1_h2_on_a_and_sw_h3_on_b(split):
    assert split.name == "fabric-split"
    assert [(h.name, split.machine_of(h.name)) for h in split.hosts] == \
        [("h1", "a"), ("h2", "a"), ("h3", "b"), ("sw", "b")]
    assert split.machine_names == ("a", "b")
    assert split.split is True


def test_split_fabric_l1_and_l2_cross_machines_and_l3_does_not(split):
    assert split.crosses(split.link("l1"))
    assert not split.crosses(split.link("l3"))
    assert [k.name for k in split.cross_links] == ["l1", "l2"]
    assert all(k.vni is None for k in split.links)


def test_split_fabric_machines_and_default_vxlan_port(split):
    assert split.machines == (
        Machine("a", "a", "dc0", ipaddress.IPv4Address("198.18.0.1"), "dc"),
        Machine("b", "b", "dc0", ipaddress.IPv4Address("198.18.0.2"), "dc"))
    assert split.machine("b") is split.machines[1]
    assert split.vxlan_port == 4789


def test_split_fabric_is_the_fabric_but_for_its_name_and_machines(split):
    # What the DCB scenarios see of dcb-fabric must be unchanged.
    fabric = load(FABRIC)
    assert tuple(replace(h, machine="") for h in split.hosts) == fabric.hosts
    assert (split.links, split.dcbx) == (fabric.links, fabric.dcbx)


# --- defaults ----------------------------------------------------------------

def test_a_lab_without_machines_is_all_on_this_machine():
    topo = load(FABRIC)
    assert (topo.machines, topo.vxlan_port) == ((), 4789)
    assert all(h.machine == "" for h in topo.hosts)
    assert topo.machine_names == ("",)
    assert (topo.split, topo.cross_links) == (False, ())


def test_network_defaults_to_dc():
    assert parse(_lab(), "lab.toml").machine("a").network == "dc"


def test_machines_without_hosts_are_allowed():
    topo = parse(_lab(), "lab.toml")
    assert [m.name for m in topo.machines] == ["a", "b"]
    assert topo.machine_names == ("",)
    assert topo.split is False


def test_machine_local_is_this_machine():
    topo = parse(_lab(h1="local"), "lab.toml")
    assert topo.machine_of("h1") == ""
    assert not topo.crosses(topo.link("l1"))


def test_machine_names_follow_the_first_host_and_include_this_machine():
    # h1 and h2 on b, h3 and h4 (after them in the file) here.
    text = _lab(h1="b", h2="b") + """\
[hosts.h3.nics.eth0]
[hosts.h4.nics.eth0]
[links.l2]
a = "h3:eth0"
b = "h4:eth0"
"""
    topo = parse(text, "lab.toml")
    assert [(h.name, h.machine) for h in topo.hosts] == \
        [("h1", "b"), ("h2", "b"), ("h3", ""), ("h4", "")]
    assert topo.machine_names == ("b", "")
    assert topo.split is True
    assert topo.cross_links == ()


def test_vni_and_vxlan_port_are_read_as_given():
    a_to_c = MACHINES.replace('network = "lab"\n', "") + """\
[machines.c]
ssh = "c"
underlay = "eth1"
address = "198.18.0.3"
"""
    text = _lab(h1="a", h2="c", link="vni = 16777215\n",
                top="vxlan_port = 8472\n").replace(MACHINES, a_to_c)
    topo = parse(text, "lab.toml")
    assert topo.link("l1").vni == 16777215
    assert topo.vxlan_port == 8472


def test_the_same_address_on_two_networks_is_fine():
    topo = parse(_lab().replace('address = "198.18.0.2"',
                                'address = "198.18.0.1"'), "lab.toml")
    assert topo.machine("a").address == topo.machine("b").address


def test_unknown_machine_lookup_names_the_known_machines(split):
    with pytest.raises(TopologyError) as exc:
        split.machine("c")
    assert str(exc.value) == \
        f'{split.path}: unknown machine "c" (machines: a, b)'
