"""The DCB fabric (topology/dcb-fabric.toml): h1, h2 and h3 on a switch
VM, sw, whose port toward h3 is shaped; sw trusts the PCP on ingress,
enforces its DCB configuration with `ets` under the shaper, and hands it
to the hosts by DCBX. Expected numbers come from the topology file.
docs/fabric.md explains the data path and the measurements."""

import dataclasses
import json
import statistics
import subprocess
import sys

import pytest

from dcblab.core.paths import ROOT
from dcblab.lab.dcbx import ets_tlv_args
from dcblab.lab.switch import (ETS_HANDLE, ets_qdisc_args, fifo_handle,
                               port_bands)
from dcblab.lab.top import Top
from dcblab.scenarios.fabric import (cgroup_apps, congested_port,
                                     expected_shares, offer, queue_delay_s,
                                     strict_priority)
from dcblab.scenarios.plot import plot_result
from dcblab.testing.dcb import (apps_of, dcb_show, ets_of, peer_tlv, pfc_of,
                                wait_for)
from dcblab.testing.traffic import Sink, flow_of, pcp_counts, send

DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]
# How far a measured share may be from the configured one (the issue's
# goal: 5 percentage points).
SHARE_TOLERANCE = 0.05
# Each ETS class is offered this many times the port's line rate in all.
LOAD = 1.2


@pytest.fixture(scope="module")
def port(dcblab_labs):
    sw, port, rx = congested_port(dcblab_labs.get("dcb-fabric").topology)
    assert (sw.name, port.name, rx) == ("sw", "swp3", "h3")
    return port


def _mac(fabric, host, nic):
    return fabric.wire.mac(fabric.topology.host(host).nic(nic))


def test_pcp_is_kept_from_h1_through_sw_to_h3_on_vlan_100(fabric):
    dst = fabric.topology.address("h3", vlan=100)
    fabric.h1.run(["ping", "-c", "1", "-W", "2", dst])
    sink = Sink(fabric.h3, "eth0", count=3 * 50, timeout=20)
    for pcp in (1, 5, 7):
        send(fabric.h1, dst, count=50, rate=200, flow=pcp, so_priority=pcp)
    got = sink.result()
    for pcp in (1, 5, 7):
        assert pcp_counts(flow_of(got, pcp)) == {pcp: 50}
    # sw's ingress trusted each PCP: its filter for that PCP counted it.
    out = fabric.sw.run(["tc", "-s", "filter", "show", "dev", "swp1",
                         "ingress"]).stdout
    assert "vlan_prio 5" in out and "skbedit" in out


def test_lldp_ends_at_the_switch_each_host_sees_only_its_port(fabric):
    """Each host's lldpad neighbour is the switch port it is cabled to:
    the bridge does not forward LLDP (01:80:c2:00:00:0e), so h3 never
    hears h1 or h2."""
    for host, port in (("h1", "swp1"), ("h2", "swp2"), ("h3", "swp3")):
        chassis = peer_tlv(fabric.guest(host), "chassisID")
        assert _mac(fabric, "sw", port) in chassis.lower(), chassis
        for other in {"h1", "h2", "h3"} - {host}:
            assert _mac(fabric, other, "eth0") not in chassis.lower()


def test_hosts_adopt_their_switch_ports_dcb_by_dcbx(fabric):
    """Each host's driver holds its switch port's ETS, PFC and APP from
    the file (UDP-port and DSCP entries alike), put there by the host's
    (willing) lldpad; bounded wait, as an APP entry arrives with the
    LLDPDU after the switch's lldptool changes, a second or so after `up`
    under TCG."""
    for host in ("h1", "h2", "h3"):
        g = fabric.guest(host)
        port = fabric.topology.host("sw").nic(
            fabric.topology.host(host).nics[0].peer.split(":")[1])
        d = port.dcb
        want = (dict(prio_tc=d.prio_tc, tsa=d.tsa, bw=d.bw), list(d.pfc),
                sorted((a.protocol, a.priority) for a in d.apps
                       if a.selector == "dgram-port"),
                sorted([a.protocol, a.priority] for a in d.apps
                       if a.selector == "dscp"))
        assert want[3], "the fabric advertises APP DSCP entries"
        wait_for(f"{host} to hold {port.name}'s DCB",
                 lambda: (ets_of(g), pfc_of(g), apps_of(g),
                          sorted(dcb_show(g, "app").get("dscp_prio", []))),
                 lambda got: got == want, timeout=15)


def _keep(r, tmp_path, artefact, name):
    """The result as JSON and as a plot, both artefacts if the test fails."""
    data = r.as_json()
    (tmp_path / f"{name}.json").write_text(json.dumps(data))
    plot_result(data, tmp_path / f"{name}.png")
    artefact(f"{name}.json", tmp_path / f"{name}.json")
    artefact(f"{name}.png", tmp_path / f"{name}.png")


def test_ets_shares_at_the_congested_port_match_the_file(fabric, port,
                                                         tmp_path, artefact):
    """Three ETS classes (PCP 0, 2, 3: 20/30/50 in dcb-fabric.toml), each
    offered 1.2 x line rate from h1 and h2 at once: h3's per-class bytes
    over the steady interval split as configured. The classes' frames die
    at sw's ETS queues (drops counted there), not before."""
    pcps = (0, 2, 3)
    r = offer(fabric, pcps, load=LOAD)
    _keep(r, tmp_path, artefact, "shares")
    got = {p: round(r.share(p), 3) for p in pcps}
    want = expected_shares(port.dcb, pcps)
    print(f"shares {got}, configured {want}; port {r.wire_bps / 1e6:.2f} "
          f"Mbit/s by the host's clock")
    for p in pcps:
        assert abs(r.share(p) - want[p]) <= SHARE_TOLERANCE, (got, want)
    assert r.wrong_pcp == 0
    # The two smaller classes were held back by the scheduler: their
    # bands dropped; the port was full.
    bands = r.qdisc
    assert bands["10:2"]["drops"] > 0 and bands["10:3"]["drops"] > 0, bands
    assert r.wire_bps >= 0.9 * port.rate_bps


def test_one_class_alone_gets_the_whole_port(fabric, port):
    """Work conserving: PCP 2 (30 % share) alone, offered 1.2 x line rate
    from three flows per sender, fills the port (measured on the wire by
    the host's clock)."""
    r = offer(fabric, (2, 2, 2), load=LOAD)
    print(f"PCP 2 alone: {r.wire_bps / 1e6:.2f} Mbit/s of "
          f"{port.rate_bps / 1e6:.0f}")
    assert r.share(2) == 1.0
    assert r.wire_bps >= 0.9 * port.rate_bps
    assert r.wrong_pcp == 0


def test_strict_class_loses_nothing_and_waits_for_no_queue(fabric, port,
                                                            tmp_path,
                                                            artefact):
    """h2 saturates the three ETS classes; from h1 a strict stream (PCP 5,
    10 % of line rate) and two probes, PCP 5 and PCP 0. The strict class
    loses 0 frames and its probes never wait in a queue; the best-effort
    probe waits behind its full band: the band's length at its share.

    Measured against the issue's goal of "strict RTT within 2x idle":
    not met under TCG. Idle RTT is ~3 ms; under load the strict probes
    took a median of 8-17 ms (4 runs) while sw's strict band held no
    backlog: the extra is CPU time of four TCG guests on two host cores
    (each hop waits for its guest's vCPU thread), not queueing. What this
    test asserts is what the scheduler is responsible for: the strict
    probe is more than 20x faster than the best-effort one, which, when
    its band is full, waits the queue delay (~5.8 s here). Both are
    printed.

    The best-effort band fills only if h2 sends PCP 0 faster than its
    share. On a loaded host (CI when it built the debug kernel beside
    the suite, before .ci/run built it alone) h2's one vCPU reached
    265-340 of its 605 frames/s per class, the band
    did not fill within the run, every best-effort probe was answered,
    after 0.7-1.3 s, and the strict one was 30-33x faster (350x on an
    idle host). So the probe's wait is held against the full band's
    delay only when the band was full: some best-effort probes dropped."""
    r = strict_priority(fabric)
    _keep(r, tmp_path, artefact, "strict")
    strict = next(f for f in r.flows if f.pcp == 5)
    assert (strict.sent, strict.received, strict.wrong_pcp) == \
        (strict.sent, strict.sent, 0)
    rtt = {p["name"]: p for p in r.rtt}
    assert not any(p["error"] for p in r.rtt), r.rtt
    s_rtt = [v for _, v in rtt["strict"]["load"]]
    be_rtt = [v for _, v in rtt["best-effort"]["load"] if v is not None]
    s_idle = statistics.median(rtt["strict"]["idle_ms"])
    delay_ms = queue_delay_s(fabric, 0) * 1e3
    print(f"strict RTT: idle median {s_idle:.1f} ms, loaded median "
          f"{statistics.median(s_rtt):.1f} ms (max {max(s_rtt):.1f}); "
          f"best-effort loaded median {statistics.median(be_rtt):.0f} ms "
          f"({len(be_rtt)} of {len(rtt['best-effort']['load'])} answered);"
          f" queue delay of PCP 0's band {delay_ms:.0f} ms")
    assert None not in s_rtt                       # no strict probe lost
    assert statistics.median(s_rtt) * 20 < statistics.median(be_rtt)
    if len(be_rtt) < len(rtt["best-effort"]["load"]):   # the band was full
        assert statistics.median(be_rtt) >= 0.5 * delay_ms
    assert r.qdisc["10:1"]["drops"] == 0           # band 0: TC 3, strict
    assert r.wrong_pcp == 0


def test_two_unmodified_apps_in_cgroups_get_their_classes_shares(
        fabric, port, tmp_path, artefact):
    """On h1, dcbapp-netprio turns the APP entry sw advertises (UDP 4791
    -> priority 3) into a net_prio cgroup; a second cgroup gets priority
    2 by hand. Two senders without SO_PRIORITY, one in each, both offered
    1.2 x line rate: at h3 each arrives with its cgroup's PCP and the
    pair splits the port as their classes' shares do (50:30 -> 62.5 %,
    37.5 %)."""
    r, app_prio = cgroup_apps(fabric)
    _keep(r, tmp_path, artefact, "apps")
    assert app_prio == 3
    want = expected_shares(port.dcb, (3, 2))
    got = {p: round(r.share(p), 3) for p in (3, 2)}
    print(f"cgroup apps: shares {got}, configured {want}")
    assert all(f.cgroup and f.received for f in r.flows)
    assert r.wrong_pcp == 0
    for p in (3, 2):
        assert abs(r.share(p) - want[p]) <= SHARE_TOLERANCE, (got, want)


def _pcp(fabric, *args):
    return subprocess.run([sys.executable, str(ROOT / "bin" / "dcblab"),
                           "pcp", "--name", fabric.name, *args],
                          capture_output=True, text=True, timeout=60)


def test_pcp_on_a_switch_without_dev_names_its_ports(fabric):
    r = _pcp(fabric, "sw")
    ports = ", ".join(n.name for n in fabric.topology.host("sw").nics)
    assert r.returncode == 2
    assert r.stderr == (f"dcblab: pcp: sw is a switch: it has no eth0; name "
                        f"one of its ports ({ports}) with --dev, e.g. "
                        "`dcblab pcp sw --dev swp1`\n")


def test_pcp_on_a_switch_port_reads_its_trust_filters(fabric):
    dst = fabric.topology.address("h3", vlan=100)
    fabric.h1.run(["ping", "-c", "1", "-W", "2", dst])
    before = json.loads(_pcp(fabric, "sw", "--dev", "swp1", "-j").stdout)
    count, pcp = 40, 6
    send(fabric.h1, dst, count=count, rate=200, so_priority=pcp)
    r = _pcp(fabric, "sw", "--dev", "swp1", "-j")
    assert r.returncode == 0, r.stderr
    after = json.loads(r.stdout)
    assert (after["armed_now"], after["vlan"]) == (False, None)
    assert after["pcp"][pcp] - before["pcp"][pcp] == count


# --- a switch enforces what its ports advertise --------------------------

def _qdisc(fabric, dev):
    return fabric.sw.run(["tc", "qdisc", "show", "dev", dev]).stdout


def _ets_line(fabric, dev):
    return next((ln for ln in _qdisc(fabric, dev).splitlines()
                 if ln.startswith("qdisc ets ")), "")


def _lldptool(fabric, dev, tlv, *args):
    fabric.sw.run(["lldptool", "-T", "-i", dev, "-V", tlv, *args])


def test_shares_set_with_lldptool_are_enforced_shown_and_reset(
        fabric, port, tmp_path, artefact):
    """The issue's user: swp3's ETS set to 40/30/30 with lldptool (ETS-CFG,
    which the port runs, and ETS-REC, which h3 adopts). Within a second
    pfcd makes swp3's ets qdisc the new configuration and logs it; top
    shows what the port runs beside what the file says; h3 adopts it;
    the three classes at 1.2 x line rate split 40/30/30 at the port.
    `dcblab reset sw h3` then puts the file's 20/30/50 back on both."""
    bw = (40, 30, 30, 0, 0, 0, 0, 0)
    new = dataclasses.replace(port.dcb, bw=bw)
    ets = ets_tlv_args(new.prio_tc, new.tsa, new.bw)
    log0 = len(fabric.sw.read("/run/pfcd.log").splitlines())
    try:
        _lldptool(fabric, port.name, "ETS-CFG", *ets)
        want = " ".join(ets_qdisc_args(new))
        _, took = wait_for("swp3's ets qdisc to follow its DCB",
                           lambda: _ets_line(fabric, port.name),
                           lambda ln: ln.rstrip().endswith(want), timeout=5)
        print(f"swp3's ets qdisc followed lldptool's ETS-CFG in "
              f"{took:.2f} s (pfcd reads dcbnl every 0.1 s)")
        log = fabric.sw.read("/run/pfcd.log").splitlines()[log0:]
        assert any("swp3: ETS enforced from its DCB" in ln and
                   "tc-bw 40,30,30" in ln and "quanta 4000 3000 3000" in ln
                   for ln in log), log
        top = Top(fabric.name, fabric.topology, fabric.lab.machines,
                  ["sw", "h3"])
        try:
            s0 = top.sample()
            rep = top.report(s0, top.sample(), 1.0)
        finally:
            top.close()
        swp3 = next(p for m in rep["machines"] for p in m["ports"]
                    if p["dev"] == port.name)
        assert swp3["dcb"]["same"] is False
        assert swp3["dcb"]["port"]["tc_bw"] == list(bw)
        assert swp3["dcb"]["file"]["tc_bw"] == list(port.dcb.bw)
        _lldptool(fabric, port.name, "ETS-REC", *ets)
        wait_for("h3 to adopt swp3's ETS-REC", lambda: ets_of(fabric.h3),
                 lambda e: e["bw"] == bw)
        pcps = (0, 2, 3)
        r = offer(fabric, pcps, load=LOAD)
        _keep(r, tmp_path, artefact, "shares-40-30-30")
        got = {p: round(r.share(p), 3) for p in pcps}
        want_shares = expected_shares(new, pcps)
        print(f"after lldptool: shares {got}, configured {want_shares}")
        for p in pcps:
            assert abs(r.share(p) - want_shares[p]) <= SHARE_TOLERANCE, \
                (got, want_shares)
    finally:
        res = subprocess.run(DCBLAB + ["reset", "--name", fabric.name,
                                       "sw", "h3"],
                             capture_output=True, text=True, timeout=120)
    print(res.stdout)
    assert res.returncode == 0, res.stderr
    assert ("swp3: DCB was tc-bw 40 30 30 str, prio-tc 0 0 1 2 0 3 0 0, "
            "pfc 3; now the file's tc-bw 20 30 50 str") in res.stdout
    assert _ets_line(fabric, port.name).rstrip().endswith(
        " ".join(ets_qdisc_args(port.dcb)))
    wait_for("h3 to adopt the file's ETS again", lambda: ets_of(fabric.h3),
             lambda e: e["bw"] == port.dcb.bw)


def test_pfc_and_prio_tc_changed_on_a_port_move_its_bands_and_bfifos(
        fabric):
    """PFC turned on for priority 2 on swp3 (lldptool): the band of its
    TC gets a bfifo of the port's lossless limit, and loses it when PFC
    is off again. Priority 2 moved to TC 0 on swp1 (lldptool ETS-CFG):
    swp1's priomap follows, and TC 1, now unused, keeps its band, empty.
    `dcblab reset sw h3` says what it found changed and puts it back.

    The move goes through lldpad, not `dcb` on the driver: lldpad writes
    its own ETS to the driver with every LLDPDU (30 s apart), and once,
    in a profile run, that undid a `dcb` change before the reset read it.
    pfcd follows the driver whoever writes it."""
    sw = fabric.topology.host("sw")
    swp3, swp1 = sw.nic("swp3"), sw.nic("swp1")
    band = port_bands(swp3.dcb).index(swp3.dcb.prio_tc[2])
    fifo = (f"qdisc bfifo {fifo_handle(band)} parent "
            f"{ETS_HANDLE}{band + 1} limit")
    try:
        _lldptool(fabric, "swp3", "PFC", "enabled=2,3")
        wait_for("a bfifo under the band of priority 2",
                 lambda: _qdisc(fabric, "swp3"), lambda q: fifo in q,
                 timeout=5)
        _lldptool(fabric, "swp3", "PFC", "enabled=3")
        wait_for("that bfifo gone", lambda: _qdisc(fabric, "swp3"),
                 lambda q: fifo not in q, timeout=5)
        moved = dataclasses.replace(swp1.dcb, prio_tc=(0, 0, 0, 2, 0, 3, 0,
                                                       0))
        _lldptool(fabric, "swp1", "ETS-CFG",
                  *ets_tlv_args(moved.prio_tc, moved.tsa, moved.bw))
        want = " ".join(ets_qdisc_args(moved))
        line, _ = wait_for("swp1's priomap to follow", lambda: _ets_line(
            fabric, "swp1"), lambda ln: ln.rstrip().endswith(want),
            timeout=5)
        # TC 1 is still in use (below TC 3): its band stays, empty.
        assert " bands 4 " in line
    finally:
        # h3 took PFC 2,3 by DCBX: it is put back too.
        res = subprocess.run(DCBLAB + ["reset", "--name", fabric.name,
                                       "sw", "h3"],
                             capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "swp1: DCB was" in res.stdout
    for dev in ("swp1", "swp3"):
        p = sw.nic(dev)
        assert _ets_line(fabric, dev).rstrip().endswith(
            " ".join(ets_qdisc_args(p.dcb)))
