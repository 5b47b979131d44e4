"""The lab file's model: frozen dataclasses a topology is read into once.

Everything below the parser trusts these fields; see parser.py for the
checks and docs/topology.md for the schema.
"""

import ipaddress
import json
from dataclasses import dataclass
from typing import Optional

from ..core.errors import UsageError

__all__ = ["TopologyError", "Topology", "Host", "Nic", "Vlan", "Link", "quote"]


class TopologyError(UsageError):
    """A topology file is missing or invalid; the message is one line
    naming the file, the key and the value (exit status 2)."""


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
class Nic:
    host: str
    name: str
    index: int
    ipv4: Optional[ipaddress.IPv4Interface]
    ipv6: Optional[ipaddress.IPv6Interface]
    vlans: tuple[Vlan, ...]
    link: str
    queues: int

    def vlan_dev(self, vlan: Vlan) -> str:
        return f"{self.name}.{vlan.id}"


@dataclass(frozen=True)
class Host:
    name: str
    index: int
    memory_mib: int
    cpus: int
    nics: tuple[Nic, ...]


@dataclass(frozen=True)
class Link:
    name: str
    a: Nic
    b: Nic
    queues: int


@dataclass(frozen=True)
class Topology:
    name: str
    path: str
    hosts: tuple[Host, ...]
    links: tuple[Link, ...]
    # lldpad (LLDP, and DCBX where the NIC's driver does DCB) runs in
    # every guest of the lab
    dcbx: bool = False

    def host(self, name: str) -> Host:
        return _find(self.hosts, name, "host", self.path)

    def link(self, name: str) -> Link:
        return _find(self.links, name, "link", self.path)

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
