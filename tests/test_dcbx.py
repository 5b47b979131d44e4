"""DCBX between the two guests: lldpad on each virtio eth0 (kernel patch
0002 gives it dcbnl), configured with lldptool, and what each guest's
*driver* ends up with (``dcb -j ... show``), not only what lldptool says.

Facts these tests rest on (openlldp 1.1, measured in the guests):
- every 802.1Qaz TLV (ETS-CFG, ETS-REC, PFC, APP) has enableTx=no until
  lldptool enables it: a port sends nothing DCB by default;
- lldpad writes its operational configuration to the driver each time it
  builds an LLDPDU, so the driver follows a change within about a second
  (each change makes lldpad send at once);
- ETS is asymmetric: a willing port takes the peer's ETS-REC, whatever the
  peer's willing bit; PFC is symmetric: a willing port takes the peer's
  PFC if the peer is unwilling, and when both are willing the port with
  the lower MAC address takes the other's (lldpad's pfc_sm, after IEEE
  802.1Qaz-2011 clause 38 / IEEE 802.1Q-2014 clause 38, DCBX: ETS is
  passed asymmetrically, PFC symmetrically);
- APP entries a peer advertises are installed in the local driver whether
  or not the local port is willing, and removed when the peer stops
  advertising them; lldpad advertises the entries it learned too, so with
  both sides sending APP a withdrawn entry can be echoed back and live on
  (seen twice): only the unwilling side sends APP here (``dcbx_port``).
Each test starts from fresh lldpad state and default driver DCB in both
guests (fixture ``dcbx``).
"""

import pytest

from dcblab.lab import start_dcbapp, stop_dcbapp
from dcblab.scenarios import REC, DcbState, app_chain, negotiate
from dcblab.testing.dcb import (apps_of, dcb_show, dcbx_port, ets_of,
                                ets_rec_args, fresh_lldpad, lldp_del_app,
                                lldp_set, peer_tlv, pfc_of, wait_for)

X = REC
X2 = dict(prio_tc=(0, 1, 1, 1, 1, 1, 1, 2),
          tsa=("ets", "ets", "ets") + ("strict",) * 5,
          bw=(50, 25, 25, 0, 0, 0, 0, 0))
Y = dict(prio_tc=(0, 1, 0, 1, 0, 1, 0, 1),
         tsa=("ets", "ets") + ("strict",) * 6, bw=(20, 80, 0, 0, 0, 0, 0, 0))
DEFAULT = dict(prio_tc=(0,) * 8, tsa=("strict",) * 8, bw=(0,) * 8)


@pytest.fixture
def dcbx(lab):
    guests = [lab.h1, lab.h2]
    fresh_lldpad(guests)
    yield lab
    fresh_lldpad(guests)


# --- 3: willing follows unwilling ---------------------------------------------

def test_willing_h1_takes_ets_rec_pfc_and_app_from_unwilling_h2(dcbx):
    lab = dcbx
    n = negotiate(lab, rec=X, pfc=[3, 4], app_prio=5)
    print(f"ETS-REC converged on h1's driver in {n.seconds:.2f} s, "
          f"ETS, PFC and APP in {n.seconds_all:.2f} s")
    assert n.before == DcbState(DEFAULT, [], [])
    assert n.after == DcbState(X, [3, 4], [(4791, 5)])
    # The driver partitioned h1's queues by the negotiated map.
    tcs = lab.h1.run(["cat", *[f"/sys/class/net/eth0/queues/tx-{q}/"
                               "traffic_class" for q in range(8)]]).stdout
    assert tcs.split() == ["0", "0", "1", "1", "2", "2", "3", "3"]
    # h2, unwilling, runs its own ETS-CFG (the default), not its REC; and
    # its own PFC.
    assert n.h2.ets == DEFAULT and n.h2.pfc == [3, 4]

    # h2 changes each: h1 follows.
    lldp_set(lab.h2, "ETS-REC", *ets_rec_args(**X2))
    wait_for("h1 follows h2's new ETS-REC", lambda: ets_of(lab.h1),
             lambda e: e == X2)
    lldp_set(lab.h2, "PFC", "enabled=6")
    wait_for("h1 follows h2's new PFC", lambda: pfc_of(lab.h1),
             lambda p: p == [6])
    lldp_del_app(lab.h2, 5, 3, 4791)
    lldp_set(lab.h2, "APP", "app=2,3,4791")
    wait_for("h1 follows h2's new APP priority", lambda: apps_of(lab.h1),
             lambda a: a == [(4791, 2)])
    lldp_del_app(lab.h2, 2, 3, 4791)
    wait_for("h1 drops the APP entry h2 withdrew", lambda: apps_of(lab.h1),
             lambda a: a == [])


def test_a_port_not_willing_keeps_its_own_ets(dcbx):
    lab = dcbx
    dcbx_port(lab.h2, willing=False, rec=X, pfc=[3])
    dcbx_port(lab.h1, willing=False)
    # h1 did receive the recommendation ...
    wait_for("h1's lldpad receives h2's ETS-REC",
             lambda: peer_tlv(lab.h1, "ETS-REC"),
             lambda t: "PRIO_MAP:  0:0 1:0 2:1 3:1 4:2 5:2 6:3 7:3" in t)
    # ... and, not willing, keeps its own configuration in the driver.
    assert ets_of(lab.h1) == DEFAULT
    assert pfc_of(lab.h1) == []


# --- 4: both willing, both unwilling ------------------------------------------

def test_both_willing_each_takes_the_others_ets_rec(dcbx):
    """ETS is asymmetric: each willing port adopts what the other
    recommends, so the two end up with each other's ETS-REC."""
    lab = dcbx
    dcbx_port(lab.h1, willing=True, rec=Y)
    dcbx_port(lab.h2, willing=True, rec=X)
    wait_for("h1 runs h2's ETS-REC", lambda: ets_of(lab.h1), lambda e: e == X)
    wait_for("h2 runs h1's ETS-REC", lambda: ets_of(lab.h2), lambda e: e == Y)


def test_both_willing_pfc_goes_to_the_higher_mac(dcbx):
    """PFC is symmetric: with both willing the port with the lower MAC
    address takes the other's PFC; the higher keeps its own, so both
    agree."""
    lab = dcbx
    mac = {g: g.read("/sys/class/net/eth0/address").strip()
           for g in (lab.h1, lab.h2)}
    low, high = sorted((lab.h1, lab.h2), key=lambda g: mac[g])
    dcbx_port(low, willing=True, pfc=[1])
    dcbx_port(high, willing=True, pfc=[6, 7])
    wait_for(f"{low.name} (lower MAC) takes {high.name}'s PFC",
             lambda: pfc_of(low), lambda p: p == [6, 7])
    wait_for("", lambda: pfc_of(high), lambda p: p == [6, 7], timeout=1)


def test_both_unwilling_each_keeps_its_own(dcbx):
    lab = dcbx
    dcbx_port(lab.h1, willing=False, rec=Y, pfc=[1])
    dcbx_port(lab.h2, willing=False, rec=X, pfc=[6])
    for g, rec in ((lab.h1, "PRIO_MAP:  0:0 1:0 2:1 3:1 4:2"),
                   (lab.h2, "PRIO_MAP:  0:0 1:1 2:0 3:1 4:0")):
        wait_for(f"{g.name} receives the peer's ETS-REC",
                 lambda g=g: peer_tlv(g, "ETS-REC"), lambda t, r=rec: r in t)
    assert ets_of(lab.h1) == DEFAULT and ets_of(lab.h2) == DEFAULT
    assert pfc_of(lab.h1) == [1] and pfc_of(lab.h2) == [6]


# --- 5: the whole chain: DCBX APP -> dcbapp-netprio -> net_prio -> PCP -------

def test_app_entry_from_dcbx_gives_an_unmodified_sender_its_pcp(dcbx):
    """h2 advertises UDP 4791 -> 5; dcbapp-netprio on h1 maps
    cgdcbx-3-4791 on eth0 and eth0.100; a sender started in it (setting
    no priority itself) gets PCP 5 on every frame; h2 changes the entry to
    3, then withdraws it: the stream follows, to 3, then to 0; the empty
    cgroup goes once the sender exits. (Scenario in dcblab/scenarios/
    dcbx.py; times are printed, `make bench` reports them.)"""
    r = app_chain(dcbx, burst=5000)
    advertise, change, withdraw = r.phases
    for p in r.phases:
        print(f"{p.what}: first frame with PCP {p.prio} on h2 after "
              f"{p.seconds:.2f} s; map {p.ifpriomap}; window PCPs {p.pcp}")
    # Every frame of the burst: PCP 5.
    assert advertise.pcp == {5: r.burst_sent}
    assert r.burst_sent == 5000
    # The map gives the priority on the port and on its VLAN upper, and on
    # nothing else.
    assert {d: p for d, p in advertise.ifpriomap.items() if p} == \
        {"eth0": 5, "eth0.100": 5}
    assert {d: p for d, p in change.ifpriomap.items() if p} == \
        {"eth0": 3, "eth0.100": 3}
    # Settled: the stream arrives with the new PCP only.
    assert set(change.pcp) == {3}, change.pcp
    # Withdrawn: map 0 everywhere, the cgroup kept while the sender is in
    # it, and every frame at PCP 0.
    assert withdraw.ifpriomap and set(withdraw.ifpriomap.values()) == {0}
    assert set(withdraw.pcp) == {0}, withdraw.pcp
    # The daemon logged each change with the entry and the devices.
    assert "sel 3 proto 4791 prio 5" in r.log, r.log
    assert "sel 3 proto 4791 prio 3" in r.log, r.log
    assert "eth0.100" in r.log


def test_dcbapp_netprio_started_late_takes_the_entries_already_there(dcbx):
    """Entries DCBX installed before the daemon started are picked up by
    its start-up DCB_CMD_IEEE_GET, not left for the next change; cgroup
    names are decimal (ethertype 0x8906, FCoE: cgdcbx-1-35078); at stop
    (--cleanup) the empty cgroups go."""
    lab, root = dcbx, "/sys/fs/cgroup/net_prio"
    dcbx_port(lab.h1, willing=True)
    dcbx_port(lab.h2, willing=False)
    lldp_set(lab.h2, "APP", "app=6,3,4791")
    lldp_set(lab.h2, "APP", "app=4,1,35078")
    wait_for("h1's driver holds both entries",
             lambda: dcb_show(lab.h1, "app"),
             lambda a: a.get("dgram_port_prio") == [[4791, 6]]
             and a.get("ethtype_prio") == [[35078, 4]])
    start_dcbapp(lab.h1.machine, "--dev", "eth0")
    try:
        maps = {}
        for cg, prio in (("cgdcbx-3-4791", 6), ("cgdcbx-1-35078", 4)):
            maps[cg], _ = wait_for(
                f"{cg} mapped", lambda cg=cg: lab.h1.run(
                    ["cat", f"{root}/{cg}/net_prio.ifpriomap"],
                    check=False).stdout,
                lambda m, p=prio: f"eth0 {p}\n" in m, timeout=5)
        assert "eth0.100 6\n" in maps["cgdcbx-3-4791"]
        assert "eth0.100 4\n" in maps["cgdcbx-1-35078"]
    finally:
        stop_dcbapp(lab.h1.machine)
    left = lab.h1.run(["sh", "-c", f"ls -d {root}/cgdcbx-* 2>/dev/null"],
                      check=False).stdout
    assert left == ""
