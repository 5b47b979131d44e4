"""Scenarios shared by the tests, the demo and the bench: each runs on a
LabHandle and returns a dataclass of what was observed."""

from .two_cgroups import (DEFAULT_PRIOS, FlowResult, TwoCgroupsResult,
                          two_cgroups_at_once)

__all__ = ["DEFAULT_PRIOS", "FlowResult", "TwoCgroupsResult",
           "two_cgroups_at_once"]
