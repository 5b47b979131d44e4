"""Scenarios shared by the tests, the demo and the bench: each runs on a
LabHandle and returns a dataclass of what was observed."""

from .dcbx import (CHAIN_CGROUP, REC, REC_PFC, ROCE_PORT, ChainPhase,
                   ChainResult, DcbState, Negotiation, app_chain, dcb_state,
                   negotiate)
from .two_cgroups import (DEFAULT_PRIOS, LINK, RECEIVER, SENDER, SINK_IDLE_S,
                          Drop, FlowResult, Stage, TwoCgroupsResult,
                          two_cgroups_at_once)

__all__ = ["CHAIN_CGROUP", "REC", "REC_PFC", "ROCE_PORT", "ChainPhase",
           "ChainResult", "DcbState", "Negotiation", "app_chain", "dcb_state",
           "negotiate", "DEFAULT_PRIOS", "LINK", "RECEIVER", "SENDER", "SINK_IDLE_S",
           "Drop", "FlowResult", "Stage", "TwoCgroupsResult",
           "two_cgroups_at_once"]
