"""What tests stand on: the guest handle, the lab handle, traffic tools in
the guests, pcap reading, kmemleak, failure evidence, and the pytest plugin (loaded by
conftest.py as ``dcblab.testing.plugin``)."""

from .evidence import artefact_dir, filter_counters, gather, sections
from .guest import KEEP_OUTPUT, Command, Guest, Spawned
from .handle import LabHandle
from .kmemleak import KMEMLEAK, Kmemleak
from .pcap import PcapError, read_frames, vlan_tag
from .traffic import (NETCLS, NETPRIO, QueueCounter, Sink, TraceCounter,
                      cgroup, flow_of, map_priority, mqprio, pcp_counts,
                      pcp_filters, pcp_packets, queue_packets, send,
                      traffic_classes, wire_pcp_per_flow)

__all__ = ["artefact_dir", "filter_counters", "gather", "sections",
           "KEEP_OUTPUT", "Command", "Guest", "Spawned", "LabHandle", "KMEMLEAK", "Kmemleak",
           "PcapError", "read_frames", "vlan_tag", "NETCLS", "NETPRIO",
           "QueueCounter", "Sink", "TraceCounter", "cgroup", "flow_of",
           "map_priority", "mqprio", "pcp_counts", "pcp_filters",
           "pcp_packets", "queue_packets", "send", "traffic_classes",
           "wire_pcp_per_flow"]
