"""A lab's topology: one TOML file under topology/, read and validated once.

The file is checked completely here, so that the layers below it (wire, vm,
agent) can trust every field: names fit interface and QEMU id rules, ranges
are what the kernel and QEMU accept, and every NIC is on exactly one link.
Each error is one line, ``<path>: <where>: <what>``, naming the file, the key
and the value.  The schema is documented in docs/topology.md.
"""

import ipaddress
import os
import re
import tomllib
from dataclasses import replace
from decimal import Decimal
from pathlib import PurePath
from typing import Optional

from .model import (APP_SELECTORS, VXLAN_PORT, App, Host, Link, Machine,
                    Nic, PortDcb, Topology, TopologyError, Vlan, quote)

__all__ = ["load", "parse"]

# Names end up in interface names, QEMU ids and netns names, whose limits
# (IFNAMSIZ 16 with the NUL) are what keeps these short.
_TOPOLOGY_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,15}")
_HOST_NAME = re.compile(r"[a-z][a-z0-9]{0,7}")
_LINK_NAME = _HOST_NAME
_NIC_NAME = re.compile(r"eth[0-9]+")
_PORT_NAME = re.compile(r"swp[1-9][0-9]*")

_TOP_KEYS = ("name", "dcbx", "vxlan_port", "machines", "hosts", "switches",
             "links")
_MACHINE_KEYS = ("ssh", "underlay", "address", "network")
# Short enough to stay usable in an interface or file name, should one
# ever carry it.
_MACHINE_NAME = re.compile(r"[a-z][a-z0-9-]{0,14}")
_NETWORK_NAME = _MACHINE_NAME
# What a host's or switch's machine = "local" means, and so no machine's
# name: the machine dcblab runs on (stored as "").
_LOCAL = "local"
# The kernel's dev_valid_name(): 1..IFNAMSIZ - 1 bytes, no "/", ":" or
# whitespace, not "." or "..".
_IFNAME = re.compile(r"[^/:\s]+")
_IFNAMSIZ = 16
_VNI_MAX = 2**24 - 1
_SWITCH_KEYS = ("memory_mib", "cpus", "machine", "vlans", "dcb", "ports")
_PORT_KEYS = ("rate", "dcb", "pfc_xoff", "pfc_xon", "pfc_headroom", "trust")
_TRUST = ("pcp", "dscp")
# PFC thresholds: bytes, from one frame to 64 MiB
_PFC_BYTES = (64, 64 << 20)
_DCB_KEYS = ("prio_tc", "tsa", "bw", "pfc", "apps")
_APP_KEYS = ("selector", "protocol", "priority")
# A rate as tc reads one (iproute2's get_rate64, tc(8) "RATES"): a decimal
# number and a unit matched ignoring case, bits/s without one. "bps" is
# bytes/s to tc: "10mbps" is 80 Mbit/s.
_RATE = re.compile(r"((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e[+-]?[0-9]{1,4})?)"
                   r"([a-z]*)", re.I)
_RATE_UNIT = {"": 1, "bit": 1,
              "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12,
              "kibit": 2**10, "mibit": 2**20, "gibit": 2**30, "tibit": 2**40,
              "bps": 8, "kbps": 8 * 10**3, "mbps": 8 * 10**6,
              "gbps": 8 * 10**9, "tbps": 8 * 10**12, "kibps": 8 * 2**10,
              "mibps": 8 * 2**20, "gibps": 8 * 2**30, "tibps": 8 * 2**40}
_RATE_UNITS_SHOWN = ("bit kbit mbit gbit tbit, kibit mibit gibit tibit; "
                     "bps kbps mbps gbps tbps, kibps mibps gibps tibps in "
                     "bytes/s; any case")
_RATE_MIN, _RATE_MAX = 100_000, 100 * 10**9
_HOST_KEYS = ("memory_mib", "cpus", "machine", "nics")
_NIC_KEYS = ("ipv4", "ipv6", "vlans", "rdma")
_VLAN_KEYS = ("id", "ipv4", "ipv6", "egress_qos_map", "ingress_qos_map")
_LINK_KEYS = ("a", "b", "queues", "speed", "vni")
# ethtool's speeds virtio_net takes: 10 Mbit/s .. 400 Gbit/s
_SPEED = (10, 400_000)

_U32_MAX = 2**32 - 1
_PCP_MAX = 7
# The kernel's own VLAN maps start empty (everything to PCP 0 / priority 0);
# the lab's default is identity so that a priority shows up as the same PCP
# on the wire and back as the same priority on the receiver.
_IDENTITY_QOS_MAP = tuple((p, p) for p in range(_PCP_MAX + 1))


def load(path) -> Topology:
    """Read and validate the topology file at path (str or PathLike)."""
    shown = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise TopologyError(f"{shown}: no such file") from None
    except OSError as e:
        raise TopologyError(f"{shown}: cannot read: {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TopologyError(f"{shown}: invalid TOML: not UTF-8 (byte "
                            f"0x{data[e.start]:02x} at offset {e.start})") \
            from None
    return parse(text, shown)


def parse(text: str, path: str) -> Topology:
    """Validate TOML text; path names the file in errors and gives the
    default topology name (its stem)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TopologyError(f"{path}: invalid TOML: {_one_line(str(e))}") \
            from None
    return _Parser(path).topology(doc)


# --- parsing ---------------------------------------------------------------

class _Parser:
    def __init__(self, path: str):
        self.path = path
        self.machines: dict[str, Machine] = {}  # [machines], once read

    def fail(self, *parts: str):
        raise TopologyError(": ".join((self.path,) + parts))

    def topology(self, doc: dict) -> Topology:
        self.keys(doc, _TOP_KEYS)
        name = self.name(doc)
        dcbx = self.bool(doc, "dcbx", False)
        vxlan_port = self.int(doc, "vxlan_port", VXLAN_PORT, 1, 65535, "")
        self.machines = self.machines_of(doc)

        hosts_t = doc.get("hosts", {})
        self.table(hosts_t, "hosts")
        if not hosts_t:
            self.fail("no hosts: declare at least one [hosts.NAME] table")
        hosts = [self.host(hname, htable, i)
                 for i, (hname, htable) in enumerate(hosts_t.items())]
        switches_t = doc.get("switches", {})
        self.table(switches_t, "switches")
        for sname, stable in switches_t.items():
            if sname in hosts_t:
                self.fail(f"switch {quote(sname)}", "a host has that name")
            hosts.append(self.switch(sname, stable, len(hosts)))
        by_name = {h.name: h for h in hosts}
        nics = {(h.name, n.name): n for h in hosts for n in h.nics}
        kinds = {h.name: h.kind for h in hosts}

        links_t = doc.get("links", {})
        self.table(links_t, "links")
        raw_links = [self.link(lname, ltable, hosts, nics)
                     for lname, ltable in links_t.items()]

        # Both checks go in file order, so the first error a user sees is
        # the first one in the file.
        on_link, peers, vnis = {}, {}, {}
        for lname, a, b, queues, speed, vni in raw_links:
            if a == b:
                self.fail(f"NIC {quote(_nic_id(a))} is on both ends of link "
                          f"{quote(lname)}")
            if a[0] == b[0] and kinds[a[0]] == "switch":
                # A loop through the bridge: every broadcast would circle.
                self.fail(f"link {quote(lname)}", f"both ends are ports of "
                          f"switch {quote(a[0])} ({_nic_id(a)}, "
                          f"{_nic_id(b)}): a loop through its bridge")
            for end in (a, b):
                if end in on_link:
                    self.fail(f"NIC {quote(_nic_id(end))} is on links "
                              f"{quote(on_link[end][0])} and {quote(lname)}")
                on_link[end] = (lname, queues, speed)
            peers[a], peers[b] = b, a
            self.across(lname, by_name[a[0]], by_name[b[0]], vni)
            if vni is not None:
                if vni in vnis:
                    self.fail(f"duplicate VNI {vni}: links "
                              f"{quote(vnis[vni])} and {quote(lname)}: give "
                              "each link its own vni")
                vnis[vni] = lname
        for key in nics:
            if key not in on_link:
                self.fail(f"NIC {quote(_nic_id(key))} is on no link: join it "
                          f"to another NIC with a [links.NAME] table, "
                          f'a = "{_nic_id(key)}", b = "HOST:NIC"')

        for key, nic in nics.items():
            if nic.dcb and nic.dcb.tcs > on_link[key][1]:
                self.fail(f"port {quote(_nic_id(key))}", f"dcb: prio_tc uses "
                          f"{nic.dcb.tcs} traffic classes, but link "
                          f"{quote(on_link[key][0])} has {on_link[key][1]} "
                          "queues (one TC needs at least one queue)")
        built = {key: replace(nic, link=on_link[key][0],
                              queues=on_link[key][1],
                              speed=on_link[key][2],
                              peer=_nic_id(peers[key]),
                              peer_is_switch=kinds[peers[key][0]] == "switch")
                 for key, nic in nics.items()}
        return Topology(
            name=name, path=self.path, dcbx=dcbx,
            hosts=tuple(replace(h, nics=tuple(built[(h.name, n.name)]
                                              for n in h.nics))
                        for h in hosts),
            links=tuple(Link(lname, built[a], built[b], queues, speed, vni)
                        for lname, a, b, queues, speed, vni in raw_links),
            machines=tuple(self.machines.values()), vxlan_port=vxlan_port)

    def machines_of(self, doc: dict) -> dict:
        """The [machines] table: {name: Machine}, in file order."""
        machines_t = doc.get("machines", {})
        self.table(machines_t, "machines")
        machines, at = {}, {}
        for mname, mtable in machines_t.items():
            where = f"machine {quote(mname)}"
            if mname == _LOCAL:
                self.fail(where, f"{quote(_LOCAL)} is reserved: it is the "
                                 "machine dcblab runs on, which needs no "
                                 "table (its guests leave machine out); "
                                 "choose another name")
            if not _MACHINE_NAME.fullmatch(mname):
                self.fail(where, f"name must match ^{_MACHINE_NAME.pattern}$")
            self.table(mtable, where=where)
            self.keys(mtable, _MACHINE_KEYS, where)
            for key in _MACHINE_KEYS[:3]:
                if key not in mtable:
                    self.fail(where, f"{key} is required")
            ssh = mtable["ssh"]
            if (not isinstance(ssh, str) or not ssh
                    or any(c.isspace() for c in ssh)
                    or ssh.startswith("-")):
                # ssh would read a destination starting with "-" as an
                # option.
                self.fail(where, 'ssh must be an ssh destination without '
                                 'whitespace, not starting with "-" (like '
                                 f'"root@192.0.2.1"), got {_show(ssh)}')
            underlay = mtable["underlay"]
            if (not isinstance(underlay, str)
                    or not _IFNAME.fullmatch(underlay)
                    or len(underlay.encode()) >= _IFNAMSIZ
                    or underlay in (".", "..")):
                self.fail(where, 'underlay must be a Linux interface name '
                                 '(1..15 bytes, no "/", ":" or whitespace) '
                                 f'like "eth1", got {_show(underlay)}')
            address = self.ipv4_address(mtable, "address", where)
            network = mtable.get("network", "dc")
            if (not isinstance(network, str)
                    or not _NETWORK_NAME.fullmatch(network)):
                self.fail(where, f"network must match "
                                 f"^{_NETWORK_NAME.pattern}$, got "
                                 f"{_show(network)}")
            if (network, address) in at:
                self.fail(where, f"address {address} is machine "
                                 f"{quote(at[network, address])}'s too, on "
                                 f"network {quote(network)}: give each "
                                 "machine its own address")
            at[network, address] = mname
            machines[mname] = Machine(mname, ssh, underlay, address, network)
        return machines

    def across(self, lname: str, a: Host, b: Host, vni):
        """A link between guests a and b: if they are on two machines,
        both must be declared and on one network; vni only if so."""
        where = f"link {quote(lname)}"
        if a.machine == b.machine:
            if vni is not None:
                on = (f"machine {quote(a.machine)}" if a.machine
                      else "this machine")
                self.fail(where, f"vni {vni} is given, but the link does not "
                                 f"cross machines (both ends on {on}): only "
                                 "a cross-machine link uses a VNI; remove it")
            return
        on = {h.name: (f"on machine {quote(h.machine)}" if h.machine
                       else "on this machine") for h in (a, b)}
        ends = f"{a.name} {on[a.name]} and {b.name} {on[b.name]}"
        here = a if not a.machine else b if not b.machine else None
        if here is not None:
            self.fail(where, f"a cross-machine link ({ends}), but this "
                             "machine cannot carry one: it has no underlay "
                             "in the file; declare it as [machines.NAME] "
                             '(ssh, underlay, address) and set machine = '
                             f'"NAME" on {here.kind} {quote(here.name)}')
        na, nb = (self.machines[h.machine].network for h in (a, b))
        if na != nb:
            self.fail(where, f"{ends} cannot reach each other: machine "
                             f"{quote(a.machine)} is on network {quote(na)}, "
                             f"{quote(b.machine)} on network {quote(nb)}")

    def name(self, doc: dict) -> str:
        if "name" in doc:
            name = doc["name"]
            if not isinstance(name, str):
                self.fail(f"name must be a string, got {_show(name)}")
            if not _TOPOLOGY_NAME.fullmatch(name):
                self.fail(f"name must match ^{_TOPOLOGY_NAME.pattern}$, "
                          f"got {quote(name)}")
            return name
        name = PurePath(self.path).stem
        if not _TOPOLOGY_NAME.fullmatch(name):
            self.fail(f"name defaults to the file name {quote(name)}, which "
                      f"does not match ^{_TOPOLOGY_NAME.pattern}$: rename "
                      "the file or set name")
        return name

    def guest(self, where, name, table, keys, cpus):
        """What hosts and switches share: name, keys, memory, CPUs and
        the machine they run on ("" for dcblab's)."""
        if not _HOST_NAME.fullmatch(name):
            self.fail(where, f"name must match ^{_HOST_NAME.pattern}$")
        self.table(table, where=where)
        self.keys(table, keys, where)
        return (self.int(table, "memory_mib", 128, 64, 4096, where),
                self.int(table, "cpus", cpus, 1, 8, where),
                self.machine(table, where))

    def machine(self, table: dict, where: str) -> str:
        machine = table.get("machine", "")
        if not isinstance(machine, str):
            self.fail(where, f"machine must be a string, got {_show(machine)}")
        if machine == _LOCAL:
            return ""
        if machine and machine not in self.machines:
            known = ", ".join(self.machines) or "none"
            self.fail(where, f"machine {quote(machine)}: unknown machine "
                             f"(machines: {known})")
        return machine

    def host(self, name: str, table, index: int) -> Host:
        where = f"host {quote(name)}"
        mem, cpus, machine = self.guest(where, name, table, _HOST_KEYS,
                                        cpus=2)

        nics_t = table.get("nics", {})
        self.table(nics_t, "nics", where)
        nics = [self.nic(name, nname, ntable)
                for nname, ntable in nics_t.items()]
        nics.sort(key=lambda n: (n.index, n.name))
        self.numbered(where, "NICs", nics, [f"eth{i}" for i in
                                            range(len(nics))])
        return Host(name, index, mem, cpus, tuple(nics), machine=machine)

    def nic(self, host: str, name: str, table) -> Nic:
        if not _NIC_NAME.fullmatch(name):
            self.fail(f"host {quote(host)}", f"NIC name {quote(name)} must "
                                             f"match ^{_NIC_NAME.pattern}$")
        where = f"NIC {quote(f'{host}:{name}')}"
        self.table(table, where=where)
        self.keys(table, _NIC_KEYS, where)
        ipv4 = self.addr(table, "ipv4", where)
        ipv6 = self.addr(table, "ipv6", where)
        vlans_v = table.get("vlans", [])
        if not isinstance(vlans_v, list):
            self.fail(where, f"vlans must be an array of tables, "
                             f"got {_show(vlans_v)}")
        vlans, seen = [], set()
        for i, vtable in enumerate(vlans_v):
            vlan = self.vlan(where, i, vtable)
            if vlan.id in seen:
                self.fail(where, f"VLAN {vlan.id} is declared twice")
            seen.add(vlan.id)
            vlans.append(vlan)
        # link and queues are known once the links are read.
        return Nic(host, name, int(name[len("eth"):]), ipv4, ipv6,
                   tuple(vlans), link="", queues=0,
                   rdma=self.bool(table, "rdma", False, where))

    def vlan(self, nic_where: str, i: int, table) -> Vlan:
        vid = table.get("id") if isinstance(table, dict) else None
        # Name the VLAN by its id once there is a usable one; before that
        # only its position in the array can point at it.
        if _is_int(vid) and 1 <= vid <= 4094:
            where = f"{nic_where}: VLAN {vid}"
        else:
            where = f"{nic_where}: vlans[{i}]"
        self.table(table, where=where)
        self.keys(table, _VLAN_KEYS, where)
        if "id" not in table:
            self.fail(where, "id is required")
        vid = self.int(table, "id", None, 1, 4094, where)
        return Vlan(
            id=vid,
            ipv4=self.addr(table, "ipv4", where),
            ipv6=self.addr(table, "ipv6", where),
            egress_qos_map=self.qos_map(table, "egress_qos_map", where,
                                        (_U32_MAX, "skb priority"),
                                        (_PCP_MAX, "PCP")),
            ingress_qos_map=self.qos_map(table, "ingress_qos_map", where,
                                         (_PCP_MAX, "PCP"),
                                         (_U32_MAX, "skb priority")))

    def switch(self, name: str, table, index: int) -> Host:
        where = f"switch {quote(name)}"
        mem, cpus, machine = self.guest(where, name, table, _SWITCH_KEYS,
                                        cpus=1)
        vlans = table.get("vlans", [])
        if not isinstance(vlans, list) or not all(_is_int(v) for v in vlans):
            self.fail(where, f"vlans must be an array of VLAN ids, "
                             f"got {_show_arr(vlans)}")
        for v in vlans:
            if not 2 <= v <= 4094:
                # VLAN 1 is the bridge's default PVID (untagged frames).
                self.fail(where, f"vlans: VLAN id must be 2..4094, got {v}")
        if len(set(vlans)) != len(vlans):
            self.fail(where, "vlans: a VLAN id is given twice")
        dcb = (self.dcb(table["dcb"], f"{where}: dcb")
               if "dcb" in table else None)
        ports_t = table.get("ports", {})
        self.table(ports_t, "ports", where)
        ports = []
        for pname, ptable in ports_t.items():
            if not _PORT_NAME.fullmatch(pname):
                self.fail(where, f"port name {quote(pname)} must match "
                                 f"^{_PORT_NAME.pattern}$")
            pwhere = f"port {quote(f'{name}:{pname}')}"
            self.table(ptable, where=pwhere)
            self.keys(ptable, _PORT_KEYS, pwhere)
            rate, rate_bps = self.rate(ptable, pwhere)
            pdcb = (self.dcb(ptable["dcb"], f"{pwhere}: dcb")
                    if "dcb" in ptable else dcb)
            xoff, xon, headroom = (
                self.int(ptable, k, None, *_PFC_BYTES, pwhere)
                for k in ("pfc_xoff", "pfc_xon", "pfc_headroom"))
            if xon is not None and xon > (xoff if xoff is not None
                                          else xon):
                self.fail(pwhere, f"pfc_xon ({xon}) must not be above "
                                  f"pfc_xoff ({xoff})")
            if xon is not None and xoff is None:
                self.fail(pwhere, "pfc_xon needs pfc_xoff (the default "
                                  "pfc_xon is half of pfc_xoff)")
            trust = ptable.get("trust", "pcp")
            if trust not in _TRUST:
                self.fail(pwhere, f"trust must be one of "
                                  f"{', '.join(map(quote, _TRUST))}, got "
                                  f"{_show(trust)}")
            if trust == "dscp" and not any(
                    a.selector == "dscp" for a in (pdcb.apps if pdcb else ())):
                self.fail(pwhere, 'trust "dscp" needs APP entries with '
                                  'selector "dscp" in the port\'s dcb (they '
                                  "map a DSCP to its priority)")
            ports.append(Nic(name, pname, int(pname[len("swp"):]) - 1,
                             None, None, (), link="", queues=0,
                             rate_bps=rate_bps, rate=rate, dcb=pdcb,
                             pfc_xoff=xoff, pfc_xon=xon,
                             pfc_headroom=headroom, trust=trust))
        ports.sort(key=lambda n: n.index)
        self.numbered(where, "ports", ports, [f"swp{i + 1}" for i in
                                              range(len(ports))])
        if not ports:
            self.fail(where, "no ports: declare [switches.NAME.ports.swp1]")
        return Host(name, index, mem, cpus, tuple(ports), kind="switch",
                    bridge_vlans=tuple(vlans), machine=machine)

    def numbered(self, where, what, items, expected):
        """items (sorted) must be named exactly expected: no gap."""
        got = [n.name for n in items]
        if got != expected:
            want = (expected[0] if len(expected) == 1
                    else f"{expected[0]}..{expected[-1]}")
            self.fail(where, f"{what} must be {want}, got {', '.join(got)}")

    def rate(self, table: dict, where: str):
        """(the rate in tc's plainest spelling, bits/s), or (None, None)."""
        if "rate" not in table:
            return None, None
        v = table["rate"]
        m = _RATE.fullmatch(v) if isinstance(v, str) else None
        if not m or m.group(2).lower() not in _RATE_UNIT:
            self.fail(where, f"rate must be a tc rate, a number and a unit "
                             f"({_RATE_UNITS_SHOWN}) like \"20mbit\", got "
                             f"{_show(v)}")
        bits = Decimal(m.group(1)) * _RATE_UNIT[m.group(2).lower()]
        if not _RATE_MIN <= bits <= _RATE_MAX:
            self.fail(where, f"rate must be 100kbit..100gbit, got {quote(v)}")
        # tc keeps whole bytes/s; exact decimal arithmetic does the same.
        bps = 8 * int(bits / 8)
        return _tc_rate(bps), bps

    def dcb(self, table, where: str) -> PortDcb:
        self.table(table, where=where)
        self.keys(table, _DCB_KEYS, where)
        prio_tc = self.int8(table, "prio_tc", (0,) * 8, 0, 7, where)
        tsa = table.get("tsa", ["strict"] * 8)
        if (not isinstance(tsa, list) or len(tsa) != 8
                or not all(t in ("strict", "ets") for t in tsa)):
            self.fail(where, 'tsa must be an array of 8 "strict" or "ets" '
                             f"(one per traffic class), got {_show_arr(tsa)}")
        bw = self.int8(table, "bw", (0,) * 8, 0, 100, where)
        ets = [tc for tc in range(8) if tsa[tc] == "ets"]
        for tc in range(8):
            if tsa[tc] == "strict" and bw[tc]:
                self.fail(where, f"bw: traffic class {tc} is strict, its "
                                 f"bandwidth must be 0, got {bw[tc]}")
        total = sum(bw[tc] for tc in ets)
        if ets and total != 100:
            self.fail(where, f"bw of the ETS traffic classes "
                             f"({', '.join(map(str, ets))}) must sum to 100, "
                             f"got {total}")
        used = max(prio_tc) + 1
        for tc in ets:
            if tc >= used:
                self.fail(where, f"tsa: traffic class {tc} is ETS but no "
                                 "priority maps to it in prio_tc")
        pfc = table.get("pfc", [])
        if (not isinstance(pfc, list) or not all(_is_int(p) for p in pfc)
                or not all(0 <= p <= 7 for p in pfc)
                or len(set(pfc)) != len(pfc)):
            self.fail(where, "pfc must be an array of distinct priorities "
                             f"0..7, got {_show_arr(pfc)}")
        apps_v = table.get("apps", [])
        if not isinstance(apps_v, list):
            self.fail(where, f"apps must be an array of tables, "
                             f"got {_show(apps_v)}")
        apps = []
        for i, a in enumerate(apps_v):
            awhere = f"{where}: apps[{i}]"
            self.table(a, where=awhere)
            self.keys(a, _APP_KEYS, awhere)
            for key in _APP_KEYS:
                if key not in a:
                    self.fail(awhere, f"{key} is required")
            sel = a["selector"]
            if sel not in APP_SELECTORS:
                self.fail(awhere, f"selector must be one of "
                                  f"{', '.join(APP_SELECTORS)}, "
                                  f"got {_show(sel)}")
            proto = self.int(a, "protocol", None, 0, APP_SELECTORS[sel][1],
                             awhere)
            prio = self.int(a, "priority", None, 0, 7, awhere)
            app = App(sel, proto, prio)
            if any((x.selector, x.protocol) == (sel, proto) for x in apps):
                self.fail(awhere, f"{sel} {proto} is given twice")
            apps.append(app)
        return PortDcb(prio_tc, tuple(tsa), bw, tuple(sorted(pfc)),
                       tuple(apps))

    def int8(self, table: dict, key: str, default, lo: int, hi: int,
             where: str):
        if key not in table:
            return default
        v = table[key]
        if (not isinstance(v, list) or len(v) != 8
                or not all(_is_int(x) for x in v)):
            self.fail(where, f"{key} must be an array of 8 integers, "
                             f"got {_show_arr(v)}")
        for i, x in enumerate(v):
            if not lo <= x <= hi:
                self.fail(where, f"{key}[{i}] must be {lo}..{hi}, got {x}")
        return tuple(v)

    def link(self, name: str, table, hosts, nics):
        where = f"link {quote(name)}"
        if not _LINK_NAME.fullmatch(name):
            self.fail(where, f"name must match ^{_LINK_NAME.pattern}$")
        self.table(table, where=where)
        self.keys(table, _LINK_KEYS, where)
        host_names = {h.name for h in hosts}
        ends = []
        for key in ("a", "b"):
            if key not in table:
                self.fail(where, f"{key} is required")
            end = table[key]
            if not isinstance(end, str):
                self.fail(where, f"{key} must be a string HOST:NIC, "
                                 f"got {_show(end)}")
            host, sep, nic = end.partition(":")
            if not sep or not host or not nic or ":" in nic:
                self.fail(where, f"{key} must be HOST:NIC, got {quote(end)}")
            if host not in host_names:
                self.fail(where, f"unknown host {quote(host)}")
            if (host, nic) not in nics:
                kind = next(h.kind for h in hosts if h.name == host)
                what = "port" if kind == "switch" else "NIC"
                self.fail(where, f"{kind} {quote(host)} has no {what} "
                                 f"{quote(nic)}")
            ends.append((host, nic))
        queues = self.int(table, "queues", 1, 1, 16, where)
        speed = self.int(table, "speed", None, *_SPEED, where)
        vni = self.int(table, "vni", None, 1, _VNI_MAX, where)
        return name, ends[0], ends[1], queues, speed, vni

    # --- typed values ---

    def table(self, value, key: Optional[str] = None, where: str = ""):
        if not isinstance(value, dict):
            what = (f"{key} must be a table" if key else "must be a table")
            self.fail(*filter(None, (where, f"{what}, got {_show(value)}")))

    def keys(self, table: dict, allowed, where: str = ""):
        for key in table:
            if key not in allowed:
                known = ", ".join(allowed)
                self.fail(*filter(None, (where, f"unknown key {quote(key)} "
                                                f"(known: {known})")))

    def int(self, table: dict, key: str, default, lo: int, hi: int,
            where: str) -> int:
        if key not in table:
            return default
        v = table[key]
        if not _is_int(v):
            self.fail(*filter(None, (where, f"{key} must be an integer, "
                                            f"got {_show(v)}")))
        if not lo <= v <= hi:
            self.fail(*filter(None, (where, f"{key} must be {lo}..{hi}, "
                                            f"got {v}")))
        return v

    def bool(self, table: dict, key: str, default: bool,
             where: str = "") -> bool:
        if key not in table:
            return default
        v = table[key]
        # Only TOML true/false: "true", 1 and 0 are refused, as "8" is
        # for an integer.
        if not isinstance(v, bool):
            self.fail(*filter(None, (where, f"{key} must be true or false, "
                                            f"got {_show(v)}")))
        return v

    def addr(self, table: dict, key: str, where: str):
        if key not in table:
            return None
        v = table[key]
        cls, family, other = (
            (ipaddress.IPv4Interface, "IPv4", ipaddress.IPv6Interface)
            if key == "ipv4" else
            (ipaddress.IPv6Interface, "IPv6", ipaddress.IPv4Interface))
        example = "192.0.2.1/24" if key == "ipv4" else "2001:db8::1/64"
        if not isinstance(v, str):
            self.fail(where, f"{key} must be a string, got {_show(v)}")
        want = f"{key} must be an {family} address with prefix " \
               f"(like {example}), got {quote(v)}"
        # ipaddress would take a bare address as /32 or /128; a lab address
        # without its prefix is almost always a mistake, so one is required.
        if "/" not in v:
            self.fail(where, want)
        try:
            return cls(v)
        except ValueError:
            pass
        try:
            other(v)
        except ValueError:
            self.fail(where, want)
        self.fail(where, f"{key} must be an {family} address, got {quote(v)}, "
                         f"which is {'IPv6' if family == 'IPv4' else 'IPv4'}")

    def ipv4_address(self, table: dict, key: str, where: str):
        """A required IPv4 address without prefix."""
        v = table[key]
        if isinstance(v, str):
            try:
                return ipaddress.IPv4Address(v)
            except ValueError:
                pass
        want = (f"{key} must be an IPv4 address without prefix (like "
                f"198.18.0.1), got {_show(v)}")
        try:
            ipaddress.IPv6Address(v if isinstance(v, str) else "")
        except ValueError:
            self.fail(where, want)
        self.fail(where, f"{want}, which is IPv6")

    def qos_map(self, table: dict, key: str, where: str, frm, to):
        if key not in table:
            return _IDENTITY_QOS_MAP
        v = table[key]
        if not isinstance(v, str):
            self.fail(where, f"{key} must be a string of FROM:TO pairs, "
                             f"got {_show(v)}")
        # An empty map would leave `ip link ... egress-qos-map` without an
        # argument; "0:0" already gives the kernel's all-zero map.
        if not v.split():
            self.fail(where, f"{key} must have at least one FROM:TO pair, "
                             f"got {quote(v)}")
        pairs = {}
        for word in v.split():
            m = re.fullmatch(r"([0-9]+):([0-9]+)", word)
            if not m:
                self.fail(where, f"{key}: pair {quote(word)} must be FROM:TO")
            pair = (int(m.group(1)), int(m.group(2)))
            for n, (hi, what), side in ((pair[0], frm, "FROM"),
                                        (pair[1], to, "TO")):
                if n > hi:
                    self.fail(where, f"{key}: pair {quote(word)}: {side} "
                                     f"({what}) must be 0..{hi}, got {n}")
            if pair[0] in pairs:
                self.fail(where, f"{key}: FROM ({frm[1]}) {pair[0]} is "
                                 "mapped twice")
            pairs[pair[0]] = pair[1]
        return tuple(sorted(pairs.items()))


def _is_int(v) -> bool:
    # TOML true/false are Python bools, which are ints; they must not pass.
    return isinstance(v, int) and not isinstance(v, bool)


def _show_arr(v) -> str:
    """Like _show, but a short array of scalars is written out: what is
    wrong with [0, 0, 1] is in its items."""
    if (isinstance(v, list) and len(v) <= 9
            and all(isinstance(x, (int, str)) and not isinstance(x, dict)
                    for x in v)):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    return _show(v)


def _tc_rate(bps: int) -> str:
    """bits/s in the plainest spelling tc takes: "10mbit", "1500kbit"."""
    for unit, scale in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bps % scale == 0:
            return f"{bps // scale}{unit}"
    return f"{bps}bit"


def _nic_id(key) -> str:
    return f"{key[0]}:{key[1]}"


def _show(v) -> str:
    """A value as it would be written in TOML, for 'got ...'."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "an array"
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return str(v)


def _one_line(s: str) -> str:
    return " ".join(s.split())
