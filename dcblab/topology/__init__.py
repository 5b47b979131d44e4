"""The lab file: a TOML topology read into frozen dataclasses and validated
once (leaf layer: imports only dcblab.core)."""

from .model import (Host, Link, Machine, Nic, Topology, TopologyError, Vlan,
                    quote)
from .parser import load, parse

__all__ = ["Host", "Link", "Machine", "Nic", "Topology", "TopologyError",
           "Vlan", "quote", "load", "parse"]
