"""The lab file's model: frozen dataclasses a topology is read into once.

Everything below the parser trusts these fields; see parser.py for the
checks and docs/topology.md for the schema.
"""

import ipaddress
import json
from dataclasses import dataclass
from typing import Optional

from ..core.errors import UsageError

__all__ = ["TopologyError", "Topology", "Machine", "Host", "Nic", "Vlan",
           "Link", "App", "PortDcb", "APP_SELECTORS", "VXLAN_PORT", "quote"]

# dcb(8)'s names of the IEEE APP selectors (802.1Qaz table D-9), in the
# order of their numbers 1..5, and the largest protocol value of each.
APP_SELECTORS = {"ethtype": (1, 0xffff), "stream-port": (2, 0xffff),
                 "dgram-port": (3, 0xffff), "port": (4, 0xffff),
                 "dscp": (5, 63)}


# The UDP port of a split lab's VXLAN tunnels unless the file gives one:
# IANA's VXLAN port (RFC 7348).
VXLAN_PORT = 4789


class TopologyError(UsageError):
    """A topology file is missing or invalid; the message is one line
    naming the file, the key and the value (exit status 2)."""


@dataclass(frozen=True)
class Machine:
    """A computer a lab split across machines runs guests on
    (``[machines.NAME]``): the controller reaches it by ssh, and a link
    from one of its guests to another machine's is carried over VXLAN
    from its underlay device and address (docs/scale.md)."""
    name: str
    ssh: str                        # ssh's destination: "root@10.0.0.1"
    underlay: str                   # a Linux interface name: "eth1"
    address: ipaddress.IPv4Address  # its address on underlay
    # Machines on one network reach each other's addresses; machines on
    # two cannot carry a link between them.
    network: str = "dc"


@dataclass(frozen=True)
class Vlan:
    id: int
    ipv4: Optional[ipaddress.IPv4Interface]
    ipv6: Optional[ipaddress.IPv6Interface]
    # (skb priority, PCP) pairs, sorted by skb priority
    egress_qos_map: tuple[tuple[int, int], ...]
    # (PCP, skb priority) pairs, sorted by PCP
    ingress_qos_map: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class App:
    """One APP entry: traffic by (selector, protocol) gets priority."""
    selector: str       # a key of APP_SELECTORS ("dgram-port": UDP port)
    protocol: int
    priority: int

    @property
    def sel(self) -> int:
        """The IEEE selector number (lldptool's app=PRIO,SEL,PROTO)."""
        return APP_SELECTORS[self.selector][0]


@dataclass(frozen=True)
class PortDcb:
    """A switch port's DCB configuration, the way `dcb ets/pfc/app show`
    prints it: each tuple of 8 is indexed by priority (prio_tc) or by
    traffic class (tsa, bw). The switch applies it to the port's driver
    and as the qdiscs that enforce it, and lldpad advertises it."""
    prio_tc: tuple[int, ...]
    tsa: tuple[str, ...]        # "strict" or "ets" per TC
    bw: tuple[int, ...]         # percent per TC, ETS TCs sum to 100
    pfc: tuple[int, ...]        # priorities with PFC on, ascending
    apps: tuple[App, ...]

    @property
    def tcs(self) -> int:
        """Traffic classes in use: 1 + the highest TC a priority maps to."""
        return max(self.prio_tc) + 1

    def prios_of(self, tc: int) -> tuple[int, ...]:
        return tuple(p for p, t in enumerate(self.prio_tc) if t == tc)


@dataclass(frozen=True)
class Nic:
    host: str
    name: str
    index: int
    ipv4: Optional[ipaddress.IPv4Interface]
    ipv6: Optional[ipaddress.IPv6Interface]
    vlans: tuple[Vlan, ...]
    link: str
    queues: int
    # A switch port's egress shaper (bits/s, and as tc is given it: the
    # file's rate in tc's plainest spelling, "10mbit") and DCB; None on
    # host NICs and plain ports.
    rate_bps: Optional[int] = None
    rate: Optional[str] = None
    dcb: Optional[PortDcb] = None
    # A switch port's PFC thresholds in bytes, as the file gives them
    # (None: derived, dcblab.lab.switch.pfc_thresholds): the backlog of
    # a band holding a PFC priority at which the other ports pause that
    # priority (xoff) and resume it (xon), and the room above xoff for
    # what arrives before the pause takes effect (headroom).
    pfc_xoff: Optional[int] = None
    pfc_xon: Optional[int] = None
    pfc_headroom: Optional[int] = None
    # The NIC at the other end of its link ("host:nic"), and whether that
    # end is a switch port: a host NIC facing a switch takes its DCB from
    # it by DCBX (willing).
    peer: str = ""
    peer_is_switch: bool = False
    # Its link's speed in Mbit/s (None: the driver's, unknown): ethtool
    # shows it, and virtio_net times PFC pauses by it.
    speed: Optional[int] = None
    # A host NIC that carries RoCEv2: the soft-RoCE (rxe) device the
    # baseline makes on it (rdma_dev), or "" for none. A switch port's
    # ingress trust: "pcp" (a tagged frame's priority is its PCP) or
    # "dscp" (an IP packet whose DSCP has an APP entry of the port gets
    # that entry's priority; everything else as with "pcp").
    rdma: bool = False
    trust: str = "pcp"

    @property
    def rdma_dev(self) -> str:
        """The rxe device of an rdma NIC: rxe0 on eth0 (ibv_devices)."""
        return f"rxe{self.index}" if self.rdma else ""

    def vlan_dev(self, vlan: Vlan) -> str:
        return f"{self.name}.{vlan.id}"


@dataclass(frozen=True)
class Host:
    """A guest of the lab: a host, or a switch (kind "switch", whose NICs
    are its ports swp1..swpN, joined in a VLAN-aware bridge br0 with
    bridge_vlans tagged on every port)."""
    name: str
    index: int
    memory_mib: int
    cpus: int
    nics: tuple[Nic, ...]
    kind: str = "host"
    bridge_vlans: tuple[int, ...] = ()
    # The Machine it runs on; "" for the machine dcblab runs on.
    machine: str = ""

    @property
    def is_switch(self) -> bool:
        return self.kind == "switch"

    def nic(self, name: str) -> Nic:
        return _find(self.nics, name, f"{self.name} NIC", self.name)


@dataclass(frozen=True)
class Link:
    name: str
    a: Nic
    b: Nic
    queues: int
    speed: Optional[int] = None     # Mbit/s, both ends (ethtool -s)
    # The VXLAN network identifier of a link that crosses machines, as
    # the file gives it (None: not given).
    vni: Optional[int] = None


@dataclass(frozen=True)
class Topology:
    name: str
    path: str
    # every guest, switches too (after the hosts, in file order)
    hosts: tuple[Host, ...]
    links: tuple[Link, ...]
    # lldpad (LLDP, and DCBX where the NIC's driver does DCB) runs in
    # every guest of the lab
    dcbx: bool = False
    # The machines a split lab runs on, in file order (none: every guest
    # on the machine dcblab runs on), and the UDP port of the VXLAN
    # tunnels that carry links between them.
    machines: tuple[Machine, ...] = ()
    vxlan_port: int = VXLAN_PORT

    def host(self, name: str) -> Host:
        return _find(self.hosts, name, "host", self.path)

    @property
    def switches(self) -> tuple[Host, ...]:
        return tuple(h for h in self.hosts if h.is_switch)

    def link(self, name: str) -> Link:
        return _find(self.links, name, "link", self.path)

    def machine(self, name: str) -> Machine:
        return _find(self.machines, name, "machine", self.path)

    def machine_of(self, host: str) -> str:
        """The machine HOST runs on; "" for the one dcblab runs on."""
        return self.host(host).machine

    def crosses(self, link: Link) -> bool:
        """Whether link's two ends run on different machines."""
        return self.machine_of(link.a.host) != self.machine_of(link.b.host)

    @property
    def cross_links(self) -> tuple[Link, ...]:
        return tuple(k for k in self.links if self.crosses(k))

    @property
    def machine_names(self) -> tuple[str, ...]:
        """The machines that run a guest, in the order of their first
        guest; "" (dcblab's own) among them when one runs there."""
        return tuple(dict.fromkeys(h.machine for h in self.hosts))

    @property
    def split(self) -> bool:
        """Whether any guest runs on a machine other than dcblab's."""
        return any(h.machine for h in self.hosts)

    def address(self, host: str, vlan: Optional[int] = None,
                family: str = "ipv4", nic: str = "eth0") -> str:
        """HOST's address (no prefix) on NIC, or on NIC's VLAN vlan."""
        the_nic = _find(self.host(host).nics, nic, f"{host} NIC", self.path)
        where = the_nic
        if vlan is not None:
            where = next((v for v in the_nic.vlans if v.id == vlan), None)
            if where is None:
                raise TopologyError(f"{self.path}: {host}:{nic} has no VLAN "
                                    f"{vlan}")
        iface = getattr(where, family)
        if iface is None:
            raise TopologyError(f"{self.path}: {host}:{nic}"
                                f"{'' if vlan is None else f'.{vlan}'} has "
                                f"no {family} address")
        return str(iface.ip)


def _find(items, name, what, path):
    for item in items:
        if item.name == name:
            return item
    known = ", ".join(i.name for i in items) or "none"
    raise TopologyError(f"{path}: unknown {what} {quote(name)} "
                        f"({what}s: {known})")


def quote(s: str) -> str:
    """A name as messages show it: a TOML basic string, always one line."""
    # JSON string syntax is TOML's basic string syntax, and it escapes
    # newlines, so a quoted key can never break the one-line message.
    return json.dumps(s)
