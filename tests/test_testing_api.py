"""The public API of dcblab.testing (docs/testing-api.md): every name is
documented and annotated (host only), and the reference's examples, each
a test here as written there, run on the session lab (two-hosts: h1 and
h2 on link l1, VLAN 100 with identity PCP maps, lldpad in both)."""

import inspect
import re
from pathlib import Path

import pytest

import dcblab.testing
from dcblab.testing import (NETPRIO, CmdError, QueueCounter, Sink, TcCounter,
                            add_app, apps_of, capture, cgroup, dcbx_port,
                            ets_of, flow_of, fresh_lldpad, ip_dscp, lldp_set,
                            lldpad_stopped, map_priority, pcp_counts,
                            pcp_packets, pcp_rates, pfc_of, read_frames, send,
                            set_ets, set_pfc, traffic_classes, wait_for_dcbx,
                            wire_pcp_per_flow)

DOC = Path(__file__).resolve().parent.parent / "docs" / "testing-api.md"
VID = 100


# --- host only ----------------------------------------------------------------

def test_every_public_name_is_in_the_api_reference():
    text = DOC.read_text()
    missing = [n for n in dcblab.testing.__all__
               if not re.search(rf"`{re.escape(n)}\b", text)]
    assert missing == []


def test_every_example_in_the_reference_is_a_test_here_as_written():
    """Each example of docs/testing-api.md follows a line naming its test
    here, and is that test's source, character for character."""
    examples = re.findall(r"<!-- example: tests/test_testing_api.py::(\w+) "
                          r"-->\n```python\n(.*?)```", DOC.read_text(),
                          re.S)
    assert examples
    for name, code in examples:
        assert code == inspect.getsource(globals()[name]), name


def _unannotated(name, fn, skip_first=False):
    """What of fn's signature lacks an annotation, as 'name(param)'."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):       # a builtin: nothing of ours
        return []
    params = list(sig.parameters.values())[1 if skip_first else 0:]
    bad = [f"{name}({p.name})" for p in params
           if p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty:
        bad.append(f"{name} -> ?")
    return bad


def _class_unannotated(name, cls):
    bad = []
    for attr, member in vars(cls).items():
        if attr.startswith("_") and attr != "__init__":
            continue
        if isinstance(member, property):
            bad += _unannotated(f"{name}.{attr}", member.fget, True)
        elif inspect.isfunction(member):
            bad += _unannotated(f"{name}.{attr}", member, True)
    return bad


def test_every_public_callable_is_annotated_on_its_parameters_and_return():
    bad = []
    for name in dcblab.testing.__all__:
        obj = getattr(dcblab.testing, name)
        if inspect.isclass(obj):
            bad += _class_unannotated(name, obj)
        elif callable(obj):
            bad += _unannotated(name, obj)
    assert bad == []


# --- the reference's examples -------------------------------------------------

def test_a_file_written_to_a_guest_is_what_its_commands_read(lab):
    h1 = lab.h1
    h1.write("/tmp/note", "hello\n")
    assert h1.read("/tmp/note") == "hello\n"
    assert h1.run(["cat", "/tmp/note"]).stdout == "hello\n"
    later = h1.spawn(["sh", "-c", "sleep 0.2; cat /tmp/note"])
    assert h1.wait(later).stdout == "hello\n"
    with pytest.raises(CmdError) as e:
        h1.run(["cat", "/tmp/no-such-note"])
    assert e.value.rc == 1 and "No such file" in e.value.stderr


def test_a_priority_3_socket_leaves_by_tc_3_and_arrives_with_pcp_3(lab):
    h1, h2 = lab.h1, lab.h2
    prio, count = 3, 100
    dst = lab.topology.address("h2", vlan=VID)
    # mqprio on h1 (priority p -> TC p, one queue each), a counter per
    # PCP on h2's eth0, h2's address resolved from h1
    traffic_classes(h1, h2, dst, VID)
    queues = QueueCounter(h1)
    sink = Sink(h2, "eth0", count=count)
    assert send(h1, dst, priority=prio, count=count)["sent"] == count
    assert pcp_counts(flow_of(sink.result(), 1)) == {prio: count}
    assert queues.delta()[prio] == count      # sender: TC 3's queue
    assert pcp_packets(h2)[prio] == count     # receiver: tc flower, PCP 3


def test_a_flow_sent_at_a_rate_spreads_over_the_sinks_intervals(lab):
    h1, h2 = lab.h1, lab.h2
    prio, rate, count, interval = 5, 20, 40, 0.25
    dst = lab.topology.address("h2", vlan=VID)
    gold, _ = cgroup(h1, NETPRIO, "gold")
    map_priority(h1, gold, f"eth0.{VID}", prio)
    h1.run(["ping", "-c", "1", "-W", "2", dst])
    sink = Sink(h2, "eth0", count=count, timeout=30, interval=interval)
    send(h1, dst, cgroup=gold, rate=rate, count=count)
    rates = pcp_rates(sink.result())
    busy = [t for t, per_pcp in rates if per_pcp]
    assert {p for _, per_pcp in rates for p in per_pcp} == {prio}
    # priosend paces its frames: the last leaves (count - 1) / rate s
    # after the first. Half of that is the slack for a receiver whose
    # vCPU was descheduled (TCG) while the first frames waited.
    assert busy[-1] + interval - busy[0] >= (count - 1) / rate / 2


def test_dscp_and_priority_given_to_send_are_both_on_the_wire(lab, tmp_path):
    h1 = lab.h1
    dscp, prio, count = 46, 3, 20
    dst = lab.topology.address("h2", vlan=VID)
    h1.run(["ping", "-c", "1", "-W", "2", dst])
    with capture(lab, "l1", tmp_path / "l1.pcap", count=count,
                 bpf=["vlan", "and", "udp", "port", "9000"]) as pcap_file:
        send(h1, dst, dscp=dscp, priority=prio, count=count)
    assert [ip_dscp(f) for f in read_frames(pcap_file)] == [dscp] * count
    # The explicit priority, not the one the kernel derives from the TOS.
    assert wire_pcp_per_flow(pcap_file) == {1: {prio: count}}


def test_a_priority_is_counted_in_the_class_set_ets_gives_it(lab):
    h1, h2 = lab.h1, lab.h2
    prio, count = 5, 200
    prio_tc = (0, 0, 1, 1, 2, 2, 3, 3)
    tsa = ("ets", "ets") + ("strict",) * 6
    bw = (60, 40, 0, 0, 0, 0, 0, 0)
    dst = lab.topology.address("h2", vlan=VID)
    # lldpad would overwrite the driver's DCB at its next LLDPDU
    with lldpad_stopped([h1]):
        set_ets(h1, prio_tc, tsa, bw)
        set_pfc(h1, [3, 4])
        add_app(h1, "dgram-port", 4791, prio)
        assert ets_of(h1) == dict(prio_tc=prio_tc, tsa=tsa, bw=bw)
        assert pfc_of(h1) == [3, 4]
        assert apps_of(h1) == [(4791, prio)]
        h1.run(["ping", "-c", "1", "-W", "2", dst])
        classes = TcCounter(h1)
        sink = Sink(h2, "eth0", count=count)
        send(h1, dst, priority=prio, count=count)
        assert pcp_counts(flow_of(sink.result(), 1)) == {prio: count}
        # nothing else on h1 sends at priority 5: its class carried
        # exactly the flow
        assert classes.delta()[prio_tc[prio]] == count


def test_willing_h1s_driver_converges_on_what_unwilling_h2_recommends(
        lab, undo):
    h1, h2 = lab.h1, lab.h2
    rec = dict(prio_tc=(0, 0, 1, 1, 2, 2, 3, 3),
               tsa=("ets", "ets") + ("strict",) * 6,
               bw=(70, 30, 0, 0, 0, 0, 0, 0))
    fresh_lldpad([h1, h2])
    undo.callback(fresh_lldpad, [h1, h2])
    dcbx_port(h1, willing=True)
    dcbx_port(h2, willing=False, rec=rec, pfc=[3, 4])
    lldp_set(h2, "APP", "app=5,3,4791")     # priority 5, UDP (3), port 4791
    seconds = wait_for_dcbx(h1, ets=rec, pfc=[3, 4], apps=[(4791, 5)])
    print(f"h1's driver converged in {seconds:.2f} s")
    # h2, unwilling, keeps its own ETS (ETS-CFG, the default): it only
    # recommends rec
    assert ets_of(h2)["prio_tc"] == (0,) * 8
