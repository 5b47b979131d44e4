"""pktgen, make bench's yardstick for the data path (dcblab.scenarios.
datapath): its frames are the two-cgroup run's frames on the wire, and
its result is read as pktgen prints it."""

import pytest

from dcblab.scenarios import datapath
from dcblab.testing import pcp_filters, pcp_packets

VID, PCP = 100, 5


def test_pktgen_frames_reach_the_receiver_tagged_as_the_tools_frames(lab):
    """pktgen on h1's eth0, paced to 5 000 frames/s so h2 keeps up:
    every frame it says it sent reaches h2's NIC, and h2's ingress
    counters file each under VLAN 100's PCP 5."""
    count = 2000
    pcp_filters(lab.h2, "eth0", VID)
    before = pcp_packets(lab.h2, "eth0")
    got = datapath.pktgen(
        lab.h1, lab.h2, tx_dev="eth0", rx_dev="eth0",
        dst=str(lab.topology.address("h2", VID)),
        dst_mac=lab.h2.read("/sys/class/net/eth0/address").strip(),
        count=count, vlan=VID, pcp=PCP, delay_ns=200_000)
    after = pcp_packets(lab.h2, "eth0")
    assert got.sent == count and got.threads == 1
    # h2's NIC also takes the idle lab's own frames (LLDP, neighbours).
    assert count <= got.received <= count + 20, got
    per_pcp = {p: after.get(p, 0) - before.get(p, 0) for p in after}
    assert per_pcp.get(PCP) == count, per_pcp
    # Paced at 200 us a frame: the run takes at least 0.4 s.
    assert got.seconds >= count * 200e-6 * 0.95, got


SAMPLE = """\
==
Params: count 1000  min_pkt_size: 110  max_pkt_size: 110
Current:
     pkts-sofar: 1000  errors: 0
Result: OK: 81234(c81000+d234) usec, 1000 (110byte,0frags)
  12310pps 10Mb/sec (10833000bps) errors: 0
==
Params: count 1000  min_pkt_size: 110  max_pkt_size: 110
Result: OK: 90000(c89000+d1000) usec, 998 (110byte,0frags)
  11088pps 9Mb/sec (9757000bps) errors: 0
"""


def test_pktgen_results_are_read_per_device():
    assert datapath.parse_results(SAMPLE) == [(81234, 1000), (90000, 998)]


def test_a_device_without_a_result_is_an_error_naming_its_line():
    bad = SAMPLE.replace("Result: OK: 90000(c89000+d1000) usec, 998 "
                         "(110byte,0frags)", "Result: Idle")
    with pytest.raises(datapath.PktgenError, match="Result: Idle"):
        datapath.parse_results(bad)
    with pytest.raises(datapath.PktgenError, match="no device result"):
        datapath.parse_results("")


def test_the_frame_length_matches_priosends_tagged_udp_frame():
    # Ethernet 14 + 802.1Q 4 + IPv4 20 + UDP 8 + priosend's 64 bytes.
    assert datapath.frame_len(64) == 110
