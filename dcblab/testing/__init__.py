"""What tests stand on, and the public API of dcblab's tests
(docs/testing-api.md): a guest, traffic, DCB, counters, capture. Also the
failure evidence and kmemleak helpers the pytest plugin uses (loaded by
conftest.py as ``dcblab.testing.plugin``). Import from here; the modules'
other names are internal."""

from ..core.cmd import CmdError
from .dcb import (TcCounter, add_app, apps_of, dcb_show, dcbx_port, del_app,
                  ets_of, fresh_lldpad, lldp_set, lldpad_stopped, peer_tlv,
                  pfc_of, queue_tcs, set_ets, set_pfc, tc_packets, wait_for,
                  wait_for_dcbx)
from .evidence import artefact_dir, filter_counters, gather, sections
from .guest import KEEP_OUTPUT, Command, Guest, Spawned
from .handle import LabHandle
from .kmemleak import KMEMLEAK, Kmemleak
from .pcap import PcapError, capture, ip_dscp, read_frames, vlan_tag
from .traffic import (NETCLS, NETPRIO, QueueCounter, Sink, TraceCounter,
                      cgroup, flow_of, map_priority, mqprio, pcp_counts,
                      pcp_filters, pcp_packets, pcp_rates, queue_packets,
                      send, traffic_classes, wire_pcp_per_flow)

__all__ = [
    # guest
    "Guest", "Spawned", "Command", "KEEP_OUTPUT", "LabHandle", "CmdError",
    # traffic
    "NETPRIO", "NETCLS", "cgroup", "map_priority", "mqprio",
    "traffic_classes", "send", "Sink", "flow_of", "pcp_counts", "pcp_rates",
    # DCB
    "dcb_show", "ets_of", "pfc_of", "apps_of", "set_ets", "set_pfc",
    "add_app", "del_app", "lldpad_stopped", "fresh_lldpad", "dcbx_port",
    "lldp_set", "peer_tlv", "wait_for_dcbx", "wait_for",
    # counters
    "pcp_filters", "pcp_packets", "QueueCounter", "queue_packets",
    "TcCounter", "tc_packets", "queue_tcs", "TraceCounter",
    # capture
    "capture", "read_frames", "vlan_tag", "ip_dscp", "wire_pcp_per_flow",
    "PcapError",
    # the plugin's failure evidence and kmemleak
    "artefact_dir", "filter_counters", "gather", "sections", "KMEMLEAK",
    "Kmemleak",
]
