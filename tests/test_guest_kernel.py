"""The patched kernel, booted in one guest: version, controllers, tracepoint."""

import re

from dcblab.core import flavour
from dcblab.testing import KMEMLEAK

NETPRIO = "/sys/fs/cgroup/net_prio"
EVENT = "/sys/kernel/tracing/events/net_prio/netprio_skb_update"
TRACE_LINE = re.compile(
    r"netprio_skb_update: dev=(?P<dev>\S+) ifindex=(?P<ifindex>\d+) "
    r"prioidx=(?P<prioidx>\d+) old_priority=(?P<old>\d+) "
    r"new_priority=(?P<new>\d+) applied=(?P<applied>[01]) "
    r"skbaddr=(?P<skb>\S+)")
XMIT_LINE = re.compile(r"net_dev_start_xmit: dev=(?P<dev>\S+) .*?"
                       r"skbaddr=(?P<skb>\S+)")
XMIT_EVENT = "/sys/kernel/tracing/events/net/net_dev_start_xmit"


def test_kernel_release_ends_in_dcblab(guest):
    assert guest.run(["uname", "-r"]).stdout.strip().endswith("-dcblab")


def test_net_prio_and_net_cls_are_enabled_in_proc_cgroups(guest):
    rows = {}
    for line in guest.read("/proc/cgroups").splitlines():
        if not line.startswith("#"):
            name, hierarchy, _, enabled = line.split()
            rows[name] = (int(hierarchy), int(enabled))
    for ctl in ("net_prio", "net_cls"):
        assert ctl in rows, f"{ctl} missing from /proc/cgroups"
        hierarchy, enabled = rows[ctl]
        assert enabled == 1
        assert hierarchy > 0, f"{ctl} is not mounted on a v1 hierarchy"


def test_net_prio_root_cgroup_has_prioidx_and_ifpriomap(guest):
    prioidx = int(guest.read(f"{NETPRIO}/net_prio.prioidx"))
    assert prioidx >= 1
    ifpriomap = guest.read(f"{NETPRIO}/net_prio.ifpriomap")
    assert re.search(r"^lo 0$", ifpriomap, re.M), ifpriomap


def test_netprio_tracepoint_is_listed_in_tracefs(guest):
    events = guest.read("/sys/kernel/tracing/available_events").split()
    assert "net_prio:netprio_skb_update" in events
    fmt = guest.read(f"{EVENT}/format")
    for fld in ("ifindex", "prioidx", "old_priority", "new_priority",
                "applied", "skbaddr"):
        assert re.search(rf"field:[^;]*\b{fld};", fmt), \
            f"no field {fld}:\n{fmt}"


def _cpu_list(n):
    """/sys/devices/system/cpu/online for CPUs 0..n-1."""
    return "0" if n == 1 else f"0-{n - 1}"


def test_every_host_has_the_topologys_cpus_online(lab):
    """The topology's cpus reach each guest: without ACPI the kernel counts
    the processors of SeaBIOS's MP table, one per socket, so a QEMU that
    gave them as cores of one socket booted guests with 1 CPU."""
    for host in lab.topology.hosts:
        g = lab.guest(host.name)
        nproc = int(g.run(["nproc"]).stdout)
        online = g.read("/sys/devices/system/cpu/online").strip()
        assert (host.name, nproc, online) == \
            (host.name, host.cpus, _cpu_list(host.cpus))


def _dummy_with_neighbour(guest, undo, dev, addr, peer):
    guest.run(["ip", "link", "add", dev, "type", "dummy"])
    undo.callback(guest.run, ["ip", "link", "del", dev], check=False)
    guest.run(["ip", "link", "set", dev, "up"])
    guest.run(["ip", "addr", "add", f"{addr}/28", "dev", dev])
    # A dummy device answers nothing: a permanent neighbour lets IPv4
    # packets leave without waiting for ARP.
    guest.run(["ip", "neigh", "add", peer, "lladdr", "02:00:00:00:00:02",
               "dev", dev, "nud", "permanent"])
    return int(guest.read(f"/sys/class/net/{dev}/ifindex"))


def _cgroup(guest, undo, name):
    path = f"{NETPRIO}/{name}"
    guest.run(["mkdir", path])
    undo.callback(guest.run, ["rmdir", path], check=False)
    return path, int(guest.read(f"{path}/net_prio.prioidx"))


def _traced(guest, undo):
    guest.write("/sys/kernel/tracing/trace", "")
    guest.write(f"{EVENT}/enable", "1")
    undo.callback(guest.write, f"{EVENT}/enable", "0")


def _trace_events(guest):
    return [m.groupdict() for m in
            TRACE_LINE.finditer(guest.read("/sys/kernel/tracing/trace"))]


def _events_of(guest, dev, prioidx):
    return [e for e in _trace_events(guest)
            if e["dev"] == dev and int(e["prioidx"]) == prioidx]


def _ping_from(guest, cgroup, peer, count):
    # Joining a cgroup before exec needs the process's own pid: sh's $$.
    guest.run(["sh", "-c", f"echo $$ > {cgroup}/cgroup.procs && "
               f"exec ping -c {count} -i 0.05 -W 1 -q {peer}"], check=False)


def test_netprio_tracepoint_fires_with_map_applied_fields(guest, undo):
    prio, count = 3, 4
    ifindex = _dummy_with_neighbour(guest, undo, "tp0", "203.0.113.1",
                                    "203.0.113.2")
    cgroup, prioidx = _cgroup(guest, undo, "tp-applied")
    guest.write(f"{cgroup}/net_prio.ifpriomap", f"tp0 {prio}")
    _traced(guest, undo)

    _ping_from(guest, cgroup, "203.0.113.2", count)

    ours = _events_of(guest, "tp0", prioidx)
    assert len(ours) == count, _trace_events(guest)
    for e in ours:
        assert int(e["ifindex"]) == ifindex
        assert (int(e["old"]), int(e["new"]), e["applied"]) == (0, prio, "1")


def test_netprio_unmapped_cgroup_within_map_allocation_gets_priority_0(
        guest, undo):
    """Surprise documented: the map is allocated in blocks (PRIOMAP_MIN_SZ,
    net/core/netprio_cgroup.c), so a cgroup created after another cgroup's
    map was written usually has an entry too, left at 0: the tracepoint
    reports the map as applied, with priority 0."""
    count = 2
    _dummy_with_neighbour(guest, undo, "tp1", "203.0.113.17", "203.0.113.18")
    mapped, mapped_idx = _cgroup(guest, undo, "tp-mapped")
    guest.write(f"{mapped}/net_prio.ifpriomap", "tp1 6")
    later, later_idx = _cgroup(guest, undo, "tp-later")
    assert later_idx != mapped_idx
    assert "tp1 0" in guest.read(f"{later}/net_prio.ifpriomap")
    _traced(guest, undo)

    _ping_from(guest, later, "203.0.113.18", count)

    ours = _events_of(guest, "tp1", later_idx)
    assert len(ours) == count, _trace_events(guest)
    for e in ours:
        assert (int(e["old"]), int(e["new"]), e["applied"]) == (0, 0, "1")


def test_events_of_a_vlan_packet_share_its_skb_address(guest, undo):
    """A packet sent through a VLAN device passes skb_update_prio() twice,
    on the VLAN device (where the map gives it its priority) and on the
    lower device (where it has one already: applied=0); the skbaddr ties
    both events to each other and to the packet's net_dev_start_xmit on
    the lower device."""
    prio, count = 4, 3
    _dummy_with_neighbour(guest, undo, "tp2", "203.0.113.33", "203.0.113.34")
    guest.run(["ip", "link", "add", "link", "tp2", "name", "tp2.9", "type",
               "vlan", "id", "9"])
    undo.callback(guest.run, ["ip", "link", "del", "tp2.9"], check=False)
    guest.run(["ip", "link", "set", "tp2.9", "up"])
    guest.run(["ip", "addr", "add", "203.0.113.49/28", "dev", "tp2.9"])
    guest.run(["ip", "neigh", "add", "203.0.113.50", "lladdr",
               "02:00:00:00:00:03", "dev", "tp2.9", "nud", "permanent"])
    cgroup, prioidx = _cgroup(guest, undo, "tp-vlan")
    guest.write(f"{cgroup}/net_prio.ifpriomap", f"tp2.9 {prio}")
    guest.write(f"{cgroup}/net_prio.ifpriomap", "tp2 1")
    _traced(guest, undo)
    guest.write(f"{XMIT_EVENT}/enable", "1")
    undo.callback(guest.write, f"{XMIT_EVENT}/enable", "0")

    _ping_from(guest, cgroup, "203.0.113.50", count)

    trace = guest.read("/sys/kernel/tracing/trace")
    upper = [e for e in _trace_events(guest) if e["dev"] == "tp2.9"
             and int(e["prioidx"]) == prioidx]
    lower = {e["skb"]: e for e in _trace_events(guest) if e["dev"] == "tp2"
             and int(e["prioidx"]) == prioidx}
    xmit = {m["skb"] for m in XMIT_LINE.finditer(trace) if m["dev"] == "tp2"}
    assert len(upper) == count, trace
    for e in upper:
        assert (int(e["new"]), e["applied"]) == (prio, "1")
        assert e["skb"] in lower, trace
        assert (int(lower[e["skb"]]["old"]), lower[e["skb"]]["applied"]) \
            == (prio, "0")
        assert e["skb"] in xmit, trace


def test_kmemleak_is_armed_exactly_on_flavours_that_scan(guest):
    """The debug flavour's harness scans after every test: its kernel must
    have kmemleak on and clean after boot (the plugin reports leaks found
    at boot before the first test). The lab kernel has no debugfs."""
    flav = flavour()
    found = guest.run(["test", "-e", KMEMLEAK], check=False).rc == 0
    assert found == flav.kmemleak
    if flav.kmemleak:
        guest.write(KMEMLEAK, "scan")
        assert guest.read(KMEMLEAK) == ""
