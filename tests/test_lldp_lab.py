"""LLDP in the lab: with ``dcbx = true`` (the shipped two-hosts lab) lldpad
runs in both guests, its LLDPDUs cross the wire, each guest sees the other
as its neighbour, and ``dcblab-lldpad restart`` starts it afresh.

lldpad sends every 30 s once settled (msgTxInterval, fixed in lldpad), but
at once when a port's agent starts and four times a second apart when it
meets a new neighbour (txFastInit 4, msgFastTx 1 s). So a restart of one
side is what makes both sides send within seconds: its new agent sends at
once, and the other side, which dropped it on its shutdown LLDPDU (TTL 0),
meets it as a new neighbour.
"""

import re
import struct
import subprocess
import time

from dcblab.lab import LLDPAD_LOG
from dcblab.testing import pcap

LLDP_DST = bytes.fromhex("0180c200000e")   # nearest bridge
LLDP_TYPE = 0x88CC


def _nic(lab, host, name="eth0"):
    return next(n for n in lab.topology.host(host).nics if n.name == name)


def _pid(guest):
    return int(guest.run(["dcblab-lldpad", "status"]).stdout)


def _neighbour(guest, dev="eth0"):
    """The chassis and port ids lldpad holds for DEV's neighbour, as
    lldptool prints them (`MAC: 02:dc:...`); None without a neighbour."""
    out = guest.run(["lldptool", "-t", "-n", "-i", dev]).stdout
    chassis = re.search(r"^Chassis ID TLV\n\t(.*)$", out, re.M)
    port = re.search(r"^Port ID TLV\n\t(.*)$", out, re.M)
    return (chassis.group(1), port.group(1)) if chassis and port else None


def _await_neighbour(guest, want, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        got = _neighbour(guest)
        if got == want or time.monotonic() >= deadline:
            return got
        time.sleep(0.5)


def test_lab_runs_lldpad_in_every_guest_with_its_log(lab):
    assert lab.topology.dcbx, "the shipped lab is meant to run lldpad"
    for guest in lab.guests.values():
        pid = _pid(guest)
        stat = guest.read(f"/proc/{pid}/stat")
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        session = int(stat[stat.rindex(")") + 2:].split()[3])
        # Its own session: not a child of the agent command that started
        # it, nor reached by a kill of that command's process group.
        assert (comm, session) == ("lldpad", pid), stat
        log = guest.read(LLDPAD_LOG)
        start = log.rindex("=== dcblab-lldpad: start at ")
        assert "port eth0 added" in log[start:], log


def test_lldpdus_cross_the_wire_and_h2_sees_h1_as_neighbour(lab, undo,
                                                            tmp_path):
    nic1, nic2 = _nic(lab, "h1"), _nic(lab, "h2")
    macs = {lab.wire.mac(n): n.host for n in (nic1, nic2)}
    pcap_file = tmp_path / "lldp.pcap"
    # Both directions, untagged or not: the filter is the ethertype only.
    cap = lab.wire.capture(nic1, pcap_file, 8, ["ether", "proto", "0x88cc"])
    undo.callback(lambda: cap.poll() is None and cap.kill())
    lab.h1.run(["dcblab-lldpad", "restart"])

    # Each side's neighbour is the other's eth0: chassis and port ids
    # are its MAC address.
    for rx, tx in ((lab.h2, nic1), (lab.h1, nic2)):
        want = (f"MAC: {lab.wire.mac(tx)}",) * 2
        assert _await_neighbour(rx, want) == want, rx.name
    try:
        cap.wait(timeout=15)
    except subprocess.TimeoutExpired:
        cap.terminate()
        cap.wait(timeout=5)

    frames = pcap.read_frames(pcap_file)
    senders = set()
    for f in frames:
        src = ":".join(f"{b:02x}" for b in f[6:12])
        assert (f[:6], pcap.vlan_tag(f), struct.unpack("!H", f[12:14])[0]) \
            == (LLDP_DST, None, LLDP_TYPE), f.hex()
        senders.add(macs.get(src, src))
    assert senders == {"h1", "h2"}, (senders, len(frames))


def test_restart_gives_lldpad_fresh_state(lab, undo):
    h2 = lab.h2
    before = _pid(h2)
    # A setting lldpad keeps in its configuration (and an agent state in
    # its shared memory) that a fresh start must not inherit.
    h2.run(["lldptool", "set-lldp", "-i", "eth0", "adminStatus=rx"])
    undo.callback(lambda: h2.run(["dcblab-lldpad", "restart"]))
    assert h2.run(["lldptool", "get-lldp", "-i", "eth0",
                   "adminStatus"]).stdout.split() == ["adminStatus=rx"]

    h2.run(["dcblab-lldpad", "restart"])
    undo.pop_all()

    after = _pid(h2)
    assert after != before
    assert h2.run(["lldptool", "get-lldp", "-i", "eth0",
                   "adminStatus"]).stdout.split() == ["adminStatus=rxtx"]
    log = h2.read(LLDPAD_LOG)
    assert f"=== dcblab-lldpad: stop (pid {before}) at " in log
    assert log.rindex("=== dcblab-lldpad: start at ") > \
        log.index(f"=== dcblab-lldpad: stop (pid {before}) at ")
