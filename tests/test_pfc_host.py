"""Host-side checks of the PFC glue: the switch's thresholds and lossless
bands (dcblab/lab/switch.py), the topology keys, and the band counters
as tc prints them (dcblab/scenarios/fabric.py); no guest runs."""

import dataclasses

import pytest

from dcblab.core.paths import ROOT
from dcblab.lab.dcbx import pfc_applied_script
from dcblab.lab.switch import (pfc_bands, pfc_thresholds, pfcd_args,
                               port_qdiscs, switch_setup_script)
from dcblab.scenarios.fabric import parse_class_stats
from dcblab.topology import TopologyError, load, parse

FABRIC = ROOT / "topology" / "dcb-fabric.toml"

_CLASSES = """\
class ets 10:1 parent 10: 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
class ets 10:4 parent 10: leaf 24: 
 Sent 17204502 bytes 11931 pkt (dropped 4677, overlimits 0 requeues 0) 
 backlog 3Kb 2p requeues 0
class ets 10:3 parent 10: 
 Sent 10 bytes 1 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 2Mb 1400p requeues 0
"""


def test_a_backlog_tc_prints_in_kb_or_mb_is_read():
    """tc prints a backlog near a multiple of 1024 as "3Kb": the class is
    still read (the demo's live table once printed "TC2 (not read)")."""
    got = parse_class_stats(_CLASSES)
    assert set(got) == {"10:1", "10:3", "10:4"}
    assert got["10:4"]["backlog_bytes"] == 3072
    assert got["10:4"]["drops"] == 4677
    assert got["10:3"]["backlog_bytes"] == 2 * 1024 * 1024


def test_fabric_thresholds_follow_rate_and_link_speed():
    topo = load(FABRIC)
    sw = topo.host("sw")
    swp3 = sw.nic("swp3")
    # 20 ms of 10 Mbit/s; half of it; 400 ms of the 100 Mbit/s link
    assert pfc_thresholds(swp3) == (25_000, 12_500, 5_000_000)
    # an unshaped port drains at its link's 100 Mbit/s
    assert pfc_thresholds(sw.nic("swp1"))[0] == 250_000
    # each port's lossless bfifo: xoff + 400 ms of its 100 Mbit/s link
    assert pfcd_args(sw) == ["swp1:250000:125000:5250000",
                             "swp2:250000:125000:5250000",
                             "swp3:25000:12500:5025000"]


def test_only_the_band_of_priority_3_gets_a_bfifo_of_xoff_plus_headroom():
    swp3 = load(FABRIC).host("sw").nic("swp3")
    assert pfc_bands(swp3.dcb) == [3]
    lines = port_qdiscs(swp3)
    assert lines[-1] == ("qdisc replace dev swp3 parent 10:4 handle 24: "
                         "bfifo limit 5025000")
    assert sum("bfifo" in ln for ln in lines) == 1


def test_a_switch_without_pfc_has_no_lossless_band_but_runs_its_agent():
    """pfcd also makes the ets qdiscs follow the ports' DCB: a switch
    with DCB ports runs it, PFC or not; one without DCB does not."""
    sw = load(FABRIC).host("sw")
    dcb = dataclasses.replace(sw.nic("swp3").dcb, pfc=())
    nopfc = dataclasses.replace(sw, nics=tuple(
        dataclasses.replace(p, dcb=dcb) for p in sw.nics))
    assert "bfifo" not in switch_setup_script(nopfc)
    assert "dcblab-pfcd start swp1:" in switch_setup_script(nopfc)
    assert "dcblab-pfcd start swp1:" in switch_setup_script(sw)
    nodcb = dataclasses.replace(sw, nics=tuple(
        dataclasses.replace(p, dcb=None) for p in sw.nics))
    assert pfcd_args(nodcb) == []
    assert "dcblab-pfcd" not in switch_setup_script(nodcb)


def test_link_speed_reaches_both_ends_and_the_switch_script():
    topo = load(FABRIC)
    assert {link.speed for link in topo.links} == {100}
    assert topo.host("h1").nic("eth0").speed == 100
    assert "ethtool -s swp3 speed 100 duplex full" in \
        switch_setup_script(topo.host("sw"))


def test_pfc_applied_script_waits_for_each_port():
    script = pfc_applied_script(load(FABRIC).host("sw"))
    for port in ("swp1", "swp2", "swp3"):
        assert (f"/sbin/dcb pfc show dev {port} | grep -q 'prio-pfc 0:off "
                "1:off 2:off 3:on 4:off 5:off 6:off 7:off '") in script


_PORT = """
[hosts.h1.nics.eth0]
[switches.sw.ports.swp1]
{keys}
[links.l1]
a = "h1:eth0"
b = "sw:swp1"
{link}
"""


@pytest.mark.parametrize("keys,link,error", [
    ("pfc_xoff = 10", "", "pfc_xoff must be 64..67108864, got 10"),
    ("pfc_xoff = 1000\npfc_xon = 2000", "",
     "pfc_xon (2000) must not be above pfc_xoff (1000)"),
    ("pfc_xon = 2000", "", "pfc_xon needs pfc_xoff"),
    ("pfc_headroom = \"1MB\"", "", "pfc_headroom must be an integer"),
    ("", "speed = 5", "speed must be 10..400000, got 5"),
])
def test_bad_pfc_keys_are_refused_with_the_port_named(tmp_path, keys, link,
                                                      error):
    f = tmp_path / "x.toml"
    f.write_text(_PORT.format(keys=keys, link=link))
    with pytest.raises(TopologyError) as e:
        parse(f.read_text(), str(f))
    assert error in str(e.value)


def test_given_pfc_keys_are_used(tmp_path):
    f = tmp_path / "x.toml"
    f.write_text(_PORT.format(keys="pfc_xoff = 4000\npfc_xon = 1000\n"
                                   "pfc_headroom = 9000", link="speed = 1000"))
    port = parse(f.read_text(), str(f)).host("sw").nic("swp1")
    assert pfc_thresholds(port) == (4000, 1000, 9000)
    assert port.speed == 1000
