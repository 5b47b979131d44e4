"""Priorities from a net_prio cgroup, as this project's lab carries them."""

import pytest

from dcblab.testing import (NETPRIO, Sink, cgroup, flow_of, map_priority,
                            pcp_counts, send)

pytestmark = pytest.mark.topology("lab.toml")
VLAN = 10


@pytest.mark.parametrize("prio", [1, 6])
def test_a_cgroups_priority_is_the_pcp_the_receiver_sees(lab, prio):
    dst = lab.topology.address("receiver", vlan=VLAN)
    app, _ = cgroup(lab.sender, NETPRIO, "app")
    map_priority(lab.sender, app, f"eth0.{VLAN}", prio)
    lab.sender.run(["ping", "-c", "1", "-W", "2", dst])
    sink = Sink(lab.receiver, "eth0", count=20)
    send(lab.sender, dst, cgroup=app, count=20)
    assert pcp_counts(flow_of(sink.result(), 1)) == {prio: 20}
