"""The sender's ETS decides the traffic class a priority leaves by."""

import pytest

from dcblab.testing import (Sink, TcCounter, ets_of, flow_of, pcp_counts,
                            send, set_ets)

pytestmark = pytest.mark.topology("lab.toml")
VLAN = 10
PRIO_TC = (0, 0, 1, 1, 2, 2, 3, 3)
TSA = ("ets", "ets", "ets", "strict", "strict", "strict", "strict", "strict")
BW = (20, 30, 50, 0, 0, 0, 0, 0)


def test_priority_5_leaves_by_the_class_ets_maps_it_to(lab):
    dst = lab.topology.address("receiver", vlan=VLAN)
    set_ets(lab.sender, PRIO_TC, TSA, BW)
    assert ets_of(lab.sender) == dict(prio_tc=PRIO_TC, tsa=TSA, bw=BW)
    lab.sender.run(["ping", "-c", "1", "-W", "2", dst])
    classes = TcCounter(lab.sender)
    sink = Sink(lab.receiver, "eth0", count=50)
    send(lab.sender, dst, priority=5, count=50)
    assert pcp_counts(flow_of(sink.result(), 1)) == {5: 50}
    assert classes.delta()[PRIO_TC[5]] == 50

