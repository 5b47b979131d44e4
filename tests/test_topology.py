"""Topology files: the shipped lab loads as documented; each mistake in a
file is reported as one line naming the file, the place and the value."""

import ipaddress
import tomllib
from pathlib import Path

import pytest

from dcblab.topology import Topology, TopologyError, load, parse

SHIPPED = Path(__file__).parent.parent / "topology" / "two-hosts.toml"
IDENTITY = tuple((p, p) for p in range(8))

# Two hosts with one NIC each on one link: the smallest valid lab with a link.
# Tests append to it or replace a line of it to make one mistake.
BASE = """\
[hosts.h1.nics.eth0]
[hosts.h2.nics.eth0]
[links.l1]
a = "h1:eth0"
b = "h2:eth0"
"""


def _write(tmp_path, text, name="lab.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _error(tmp_path, text, name="lab.toml"):
    path = _write(tmp_path, text, name)
    with pytest.raises(TopologyError) as exc:
        load(path)
    message = str(exc.value)
    assert "\n" not in message
    return message, str(path)


def _vlan_lab(vlan_lines):
    return (BASE.replace("[hosts.h2.nics.eth0]\n",
                         "[hosts.h2.nics.eth0]\n[[hosts.h2.nics.eth0.vlans]]\n"
                         + vlan_lines + "\n"))


# --- the shipped lab ---------------------------------------------------------

@pytest.fixture(scope="module")
def shipped():
    return load(SHIPPED)


def test_shipped_lab_has_two_hosts_of_128_mib_and_2_cpus(shipped):
    assert shipped.name == "two-hosts"
    assert [(h.name, h.index, h.memory_mib, h.cpus) for h in shipped.hosts] \
        == [("h1", 0, 128, 2), ("h2", 1, 128, 2)]


def test_shipped_lab_links_h1_eth0_to_h2_eth0_with_8_queues(shipped):
    (link,) = shipped.links
    assert (link.name, link.a.host, link.a.name, link.b.host, link.b.name,
            link.queues) == ("l1", "h1", "eth0", "h2", "eth0", 8)
    assert link is shipped.link("l1")


def test_shipped_lab_nics_carry_their_link_and_queues(shipped):
    for host in shipped.hosts:
        (nic,) = host.nics
        assert (nic.host, nic.index, nic.link, nic.queues) \
            == (host.name, 0, "l1", 8)


@pytest.mark.parametrize("host, ipv4, ipv6", [
    ("h1", "192.0.2.1/24", "2001:db8:1::1/64"),
    ("h2", "192.0.2.2/24", "2001:db8:1::2/64"),
])
def test_shipped_lab_eth0_addresses(shipped, host, ipv4, ipv6):
    nic = shipped.host(host).nics[0]
    assert nic.ipv4 == ipaddress.IPv4Interface(ipv4)
    assert nic.ipv6 == ipaddress.IPv6Interface(ipv6)


@pytest.mark.parametrize("host, ipv4, ipv6", [
    ("h1", "198.51.100.1/24", "2001:db8:100::1/64"),
    ("h2", "198.51.100.2/24", "2001:db8:100::2/64"),
])
def test_shipped_lab_vlan_100_has_addresses_and_identity_maps(
        shipped, host, ipv4, ipv6):
    nic = shipped.host(host).nics[0]
    (vlan,) = nic.vlans
    assert vlan.id == 100
    assert nic.vlan_dev(vlan) == "eth0.100"
    assert vlan.ipv4 == ipaddress.IPv4Interface(ipv4)
    assert vlan.ipv6 == ipaddress.IPv6Interface(ipv6)
    assert vlan.egress_qos_map == IDENTITY
    assert vlan.ingress_qos_map == IDENTITY


def test_topology_is_frozen(shipped):
    with pytest.raises(AttributeError):
        shipped.hosts[0].cpus = 4


# --- defaults ----------------------------------------------------------------

def test_name_defaults_to_file_stem(tmp_path):
    assert load(_write(tmp_path, BASE, "my-lab.toml")).name == "my-lab"


def test_file_stem_that_is_no_valid_name_needs_a_name_key(tmp_path):
    message, path = _error(tmp_path, BASE, "My_Lab.toml")
    assert message == (f'{path}: name defaults to the file name "My_Lab", '
                       "which does not match ^[a-z0-9][a-z0-9-]{0,15}$: "
                       "rename the file or set name")


def test_host_nic_and_link_defaults(tmp_path):
    topo = load(_write(tmp_path, BASE))
    h1 = topo.host("h1")
    assert (h1.memory_mib, h1.cpus) == (128, 2)
    nic = h1.nics[0]
    assert (nic.ipv4, nic.ipv6, nic.vlans) == (None, None, ())
    assert topo.link("l1").queues == 1


def test_vlan_maps_default_to_identity(tmp_path):
    topo = load(_write(tmp_path, _vlan_lab("id = 7")))
    vlan = topo.host("h2").nics[0].vlans[0]
    assert (vlan.id, vlan.ipv4, vlan.ipv6) == (7, None, None)
    assert vlan.egress_qos_map == IDENTITY
    assert vlan.ingress_qos_map == IDENTITY


def test_qos_map_pairs_are_sorted_by_from(tmp_path):
    topo = load(_write(tmp_path, _vlan_lab(
        'id = 7\negress_qos_map = "4294967295:7 3:5 0:1"')))
    assert topo.host("h2").nics[0].vlans[0].egress_qos_map \
        == ((0, 1), (3, 5), (4294967295, 7))


def test_hosts_keep_file_order_and_nics_are_sorted(tmp_path):
    topo = load(_write(tmp_path, """\
[hosts.zz.nics.eth1]
[hosts.zz.nics.eth0]
[hosts.aa.nics.eth0]
[hosts.aa.nics.eth1]
[links.l1]
a = "zz:eth0"
b = "aa:eth0"
[links.l2]
a = "zz:eth1"
b = "aa:eth1"
"""))
    assert [(h.name, h.index) for h in topo.hosts] == [("zz", 0), ("aa", 1)]
    assert [(n.name, n.index, n.link) for n in topo.host("zz").nics] \
        == [("eth0", 0, "l1"), ("eth1", 1, "l2")]


def test_host_without_nics_needs_no_link(tmp_path):
    topo = load(_write(tmp_path, "[hosts.h1]\n"))
    assert (topo.host("h1").nics, topo.links) == ((), ())


def test_parse_uses_path_only_for_messages_and_name():
    topo = parse(BASE, "somewhere/else.toml")
    assert isinstance(topo, Topology)
    assert (topo.name, topo.path) == ("else", "somewhere/else.toml")


# --- reading -----------------------------------------------------------------

def test_missing_file_names_the_path_as_given():
    with pytest.raises(TopologyError) as exc:
        load("topology/x.toml")
    assert str(exc.value) == "topology/x.toml: no such file"


def test_invalid_toml_quotes_tomllib(tmp_path):
    text = BASE + "queues = \n"
    with pytest.raises(tomllib.TOMLDecodeError) as toml_exc:
        tomllib.loads(text)
    message, path = _error(tmp_path, text)
    assert message == f"{path}: invalid TOML: {toml_exc.value}"


def test_file_that_is_not_utf8_is_invalid_toml(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_bytes(b'name = "\xff"\n')
    with pytest.raises(TopologyError) as exc:
        load(path)
    assert str(exc.value) == \
        f"{path}: invalid TOML: not UTF-8 (byte 0xff at offset 8)"


# --- unknown keys ------------------------------------------------------------

@pytest.mark.parametrize("text, where, key", [
    ("colour = 1\n" + BASE, "", "colour"),
    (BASE.replace("[hosts.h1.nics.eth0]",
                  "[hosts.h1]\nmemroy = 1\n[hosts.h1.nics.eth0]"),
     'host "h1": ', "memroy"),
    (BASE.replace("[hosts.h1.nics.eth0]", "[hosts.h1.nics.eth0]\nmtu = 1"),
     'NIC "h1:eth0": ', "mtu"),
    (_vlan_lab("id = 100\nprio = 1"), 'NIC "h2:eth0": VLAN 100: ', "prio"),
    (BASE + "speed = 1\n", 'link "l1": ', "speed"),
])
def test_unknown_key_is_named_with_its_place(tmp_path, text, where, key):
    message, path = _error(tmp_path, text)
    assert message == f'{path}: {where}unknown key "{key}"'


# --- types and ranges --------------------------------------------------------

def test_string_queues_is_not_an_integer(tmp_path):
    message, path = _error(tmp_path, BASE + 'queues = "8"\n')
    assert message == f'{path}: link "l1": queues must be an integer, got "8"'


def test_bool_is_not_an_integer(tmp_path):
    message, path = _error(tmp_path, BASE + "queues = true\n")
    assert message == f'{path}: link "l1": queues must be an integer, got true'


def test_float_is_not_an_integer(tmp_path):
    message, path = _error(
        tmp_path, "[hosts.h1]\ncpus = 2.0\n")
    assert message == f'{path}: host "h1": cpus must be an integer, got 2.0'


@pytest.mark.parametrize("queues", [0, 17])
def test_queues_outside_1_to_16_are_rejected(tmp_path, queues):
    message, path = _error(tmp_path, BASE + f"queues = {queues}\n")
    assert message == f'{path}: link "l1": queues must be 1..16, got {queues}'


@pytest.mark.parametrize("queues", [1, 16])
def test_queues_1_and_16_are_accepted(tmp_path, queues):
    topo = load(_write(tmp_path, BASE + f"queues = {queues}\n"))
    assert topo.link("l1").queues == queues
    assert topo.host("h1").nics[0].queues == queues


@pytest.mark.parametrize("key, value, lo, hi", [
    ("memory_mib", 63, 64, 4096), ("memory_mib", 4097, 64, 4096),
    ("cpus", 0, 1, 8), ("cpus", 9, 1, 8),
])
def test_host_sizes_outside_range_are_rejected(tmp_path, key, value, lo, hi):
    message, path = _error(tmp_path, f"[hosts.h1]\n{key} = {value}\n")
    assert message == \
        f'{path}: host "h1": {key} must be {lo}..{hi}, got {value}'


@pytest.mark.parametrize("vid", [0, 4095])
def test_vlan_id_outside_1_to_4094_is_rejected(tmp_path, vid):
    message, path = _error(tmp_path, _vlan_lab(f"id = {vid}"))
    assert message == \
        f'{path}: NIC "h2:eth0": vlans[0]: id must be 1..4094, got {vid}'


def test_vlan_without_id_is_rejected(tmp_path):
    message, path = _error(tmp_path, _vlan_lab('ipv4 = "198.51.100.1/24"'))
    assert message == f'{path}: NIC "h2:eth0": vlans[0]: id is required'


def test_name_key_must_be_a_string(tmp_path):
    message, path = _error(tmp_path, "name = 3\n" + BASE)
    assert message == f"{path}: name must be a string, got 3"


def test_name_key_must_match_its_pattern(tmp_path):
    message, path = _error(tmp_path, 'name = "Two_Hosts"\n' + BASE)
    assert message == (f'{path}: name must match ^[a-z0-9][a-z0-9-]{{0,15}}$, '
                       'got "Two_Hosts"')


def test_host_name_must_match_its_pattern(tmp_path):
    message, path = _error(tmp_path, "[hosts.host12345]\n")
    assert message == \
        f'{path}: host "host12345": name must match ^[a-z][a-z0-9]{{0,7}}$'


def test_link_name_must_match_its_pattern(tmp_path):
    message, path = _error(tmp_path, BASE.replace("links.l1", "links.L1"))
    assert message == \
        f'{path}: link "L1": name must match ^[a-z][a-z0-9]{{0,7}}$'


def test_nic_name_must_be_eth_and_a_number(tmp_path):
    message, path = _error(tmp_path, "[hosts.h1.nics.wlan0]\n")
    assert message == \
        f'{path}: host "h1": NIC name "wlan0" must match ^eth[0-9]+$'


def test_host_that_is_not_a_table_is_rejected(tmp_path):
    message, path = _error(tmp_path, "[hosts]\nh1 = 3\n")
    assert message == f'{path}: host "h1": must be a table, got 3'


def test_no_hosts_is_rejected(tmp_path):
    message, path = _error(tmp_path, 'name = "empty"\n')
    assert message == \
        f"{path}: no hosts: declare at least one [hosts.NAME] table"


# --- addresses ---------------------------------------------------------------

def _nic_addr_lab(key, value):
    return BASE.replace("[hosts.h1.nics.eth0]",
                        f'[hosts.h1.nics.eth0]\n{key} = "{value}"')


@pytest.mark.parametrize("value", ["192.0.2.1", "192.0.2.300/24",
                                   "192.0.2.1/33", "h1"])
def test_bad_ipv4_is_rejected(tmp_path, value):
    message, path = _error(tmp_path, _nic_addr_lab("ipv4", value))
    assert message == (f'{path}: NIC "h1:eth0": ipv4 must be an IPv4 address '
                       f'with prefix (like 192.0.2.1/24), got "{value}"')


@pytest.mark.parametrize("value", ["2001:db8::1", "2001:db8::g/64",
                                   "2001:db8::1/129"])
def test_bad_ipv6_is_rejected(tmp_path, value):
    message, path = _error(tmp_path, _nic_addr_lab("ipv6", value))
    assert message == (f'{path}: NIC "h1:eth0": ipv6 must be an IPv6 address '
                       f'with prefix (like 2001:db8::1/64), got "{value}"')


def test_ipv6_address_given_as_ipv4_names_the_family(tmp_path):
    message, path = _error(tmp_path, _nic_addr_lab("ipv4", "2001:db8::1/64"))
    assert message == (f'{path}: NIC "h1:eth0": ipv4 must be an IPv4 address, '
                       'got "2001:db8::1/64", which is IPv6')


def test_ipv4_address_given_as_ipv6_on_a_vlan_names_the_family(tmp_path):
    message, path = _error(tmp_path, _vlan_lab(
        'id = 100\nipv6 = "198.51.100.1/24"'))
    assert message == (f'{path}: NIC "h2:eth0": VLAN 100: ipv6 must be an '
                       'IPv6 address, got "198.51.100.1/24", which is IPv4')


# --- VLANs and QoS maps ------------------------------------------------------

def test_duplicate_vlan_id_on_a_nic_is_rejected(tmp_path):
    message, path = _error(tmp_path, _vlan_lab(
        "id = 100\n[[hosts.h2.nics.eth0.vlans]]\nid = 100"))
    assert message == f'{path}: NIC "h2:eth0": VLAN 100 is declared twice'


def test_same_vlan_id_on_two_nics_is_fine(tmp_path):
    text = _vlan_lab("id = 100").replace(
        "[hosts.h1.nics.eth0]",
        "[hosts.h1.nics.eth0]\n[[hosts.h1.nics.eth0.vlans]]\nid = 100")
    topo = load(_write(tmp_path, text))
    assert [n.vlans[0].id for h in topo.hosts for n in h.nics] == [100, 100]


@pytest.mark.parametrize("key, pair, what", [
    ("egress_qos_map", "0:8", "TO (PCP) must be 0..7, got 8"),
    ("egress_qos_map", "4294967296:0",
     "FROM (skb priority) must be 0..4294967295, got 4294967296"),
    ("ingress_qos_map", "8:0", "FROM (PCP) must be 0..7, got 8"),
    ("ingress_qos_map", "0:4294967296",
     "TO (skb priority) must be 0..4294967295, got 4294967296"),
])
def test_qos_map_value_out_of_range_is_rejected(tmp_path, key, pair, what):
    message, path = _error(tmp_path, _vlan_lab(f'id = 100\n{key} = "{pair}"'))
    assert message == \
        f'{path}: NIC "h2:eth0": VLAN 100: {key}: pair "{pair}": {what}'


@pytest.mark.parametrize("pair", ["1-1", "1:", ":1", "-1:0", "1:2:3", "a:b"])
def test_malformed_qos_map_pair_is_rejected(tmp_path, pair):
    message, path = _error(tmp_path, _vlan_lab(
        f'id = 100\negress_qos_map = "0:0 {pair}"'))
    assert message == (f'{path}: NIC "h2:eth0": VLAN 100: egress_qos_map: '
                       f'pair "{pair}" must be FROM:TO')


def test_qos_map_mapping_one_from_twice_is_rejected(tmp_path):
    message, path = _error(tmp_path, _vlan_lab(
        'id = 100\ningress_qos_map = "1:1 1:2"'))
    assert message == (f'{path}: NIC "h2:eth0": VLAN 100: ingress_qos_map: '
                       "FROM (PCP) 1 is mapped twice")


def test_empty_qos_map_is_rejected(tmp_path):
    message, path = _error(tmp_path, _vlan_lab(
        'id = 100\negress_qos_map = " "'))
    assert message == (f'{path}: NIC "h2:eth0": VLAN 100: egress_qos_map must '
                       'have at least one FROM:TO pair, got " "')


def test_qos_map_must_be_a_string(tmp_path):
    message, path = _error(tmp_path, _vlan_lab(
        "id = 100\negress_qos_map = [1, 2]"))
    assert message == (f'{path}: NIC "h2:eth0": VLAN 100: egress_qos_map must '
                       "be a string of FROM:TO pairs, got an array")


# --- links -------------------------------------------------------------------

def test_link_to_unknown_host_names_file_link_and_host(tmp_path):
    message, path = _error(tmp_path, BASE.replace('"h2:eth0"', '"h3:eth0"'))
    assert message == f'{path}: link "l1": unknown host "h3"'


def test_link_to_unknown_nic_names_host_and_nic(tmp_path):
    message, path = _error(tmp_path, BASE.replace('"h1:eth0"', '"h1:eth5"'))
    assert message == f'{path}: link "l1": host "h1" has no NIC "eth5"'


def test_malformed_link_end_must_be_host_colon_nic(tmp_path):
    message, path = _error(tmp_path, BASE.replace('"h1:eth0"', '"h1eth0"'))
    assert message == f'{path}: link "l1": a must be HOST:NIC, got "h1eth0"'


def test_link_without_an_end_is_rejected(tmp_path):
    message, path = _error(tmp_path, BASE.replace('b = "h2:eth0"\n', ""))
    assert message == f'{path}: link "l1": b is required'


def test_nic_on_two_links_is_rejected(tmp_path):
    text = BASE.replace("[hosts.h2.nics.eth0]",
                        "[hosts.h2.nics.eth0]\n[hosts.h2.nics.eth1]") \
        + '[links.l2]\na = "h2:eth1"\nb = "h1:eth0"\n'
    message, path = _error(tmp_path, text)
    assert message == f'{path}: NIC "h1:eth0" is on links "l1" and "l2"'


def test_both_ends_of_a_link_on_one_nic_is_rejected(tmp_path):
    message, path = _error(tmp_path, BASE.replace('"h2:eth0"', '"h1:eth0"'))
    assert message == f'{path}: NIC "h1:eth0" is on both ends of link "l1"'


def test_link_between_two_nics_of_one_host_is_fine(tmp_path):
    topo = load(_write(tmp_path, """\
[hosts.h1.nics.eth0]
[hosts.h1.nics.eth1]
[links.l1]
a = "h1:eth0"
b = "h1:eth1"
"""))
    assert (topo.link("l1").a.name, topo.link("l1").b.name) == ("eth0", "eth1")


def test_nic_on_no_link_is_rejected(tmp_path):
    message, path = _error(tmp_path, BASE + "[hosts.h2.nics.eth1]\n")
    assert message == f'{path}: NIC "h2:eth1" is on no link'


def test_nics_without_any_link_are_rejected(tmp_path):
    message, path = _error(tmp_path, "[hosts.h1.nics.eth0]\n")
    assert message == f'{path}: NIC "h1:eth0" is on no link'


def test_nic_numbering_gap_is_rejected(tmp_path):
    message, path = _error(tmp_path, BASE + "[hosts.h1.nics.eth2]\n")
    assert message == \
        f'{path}: host "h1": NICs must be eth0..eth1, got eth0, eth2'


def test_single_nic_must_be_eth0(tmp_path):
    message, path = _error(tmp_path, "[hosts.h1.nics.eth1]\n")
    assert message == f'{path}: host "h1": NICs must be eth0, got eth1'


# --- lookups -----------------------------------------------------------------

def test_unknown_host_lookup_names_the_known_hosts(shipped):
    with pytest.raises(TopologyError) as exc:
        shipped.host("h3")
    assert str(exc.value) == \
        f'{shipped.path}: unknown host "h3" (hosts: h1, h2)'


def test_unknown_link_lookup_names_the_known_links(shipped):
    with pytest.raises(TopologyError) as exc:
        shipped.link("l2")
    assert str(exc.value) == f'{shipped.path}: unknown link "l2" (links: l1)'


def test_quoted_key_with_a_newline_stays_on_one_line(tmp_path):
    message, path = _error(tmp_path, '[hosts."h\\n1"]\n')
    assert message == \
        f'{path}: host "h\\n1": name must match ^[a-z][a-z0-9]{{0,7}}$'
