"""Protocol clients for one guest (leaf layer: imports only dcblab.core):
qemu-guest-agent, QMP, and the serial console's log watcher."""

from .agent import Agent, AgentError, AgentTimeout, Result
from .console import SPLAT_PATTERNS, Console, ConsoleTimeout, find_splats
from .qmp import Qmp, QmpError

__all__ = ["Agent", "AgentError", "AgentTimeout", "Result", "SPLAT_PATTERNS",
           "Console", "ConsoleTimeout", "find_splats", "Qmp", "QmpError"]
