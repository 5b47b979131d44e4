"""Protocol clients for one guest (leaf layer: imports only dcblab.core):
qemu-guest-agent, QMP, and the serial console's log watcher. Names are
imported on first use (see core/lazy.py)."""

from ..core.lazy import surface

__all__, __getattr__, __dir__ = surface(__name__, {
    "agent": ("Agent", "AgentError", "AgentTimeout", "Commands", "Result",
              "STREAM_TOOL"),
    "console": ("SPLAT_PATTERNS", "BOOT_FAILURES", "Console", "ConsoleTimeout",
                "BootFailed", "find_splats", "find_boot_failure"),
    "qmp": ("Qmp", "QmpError"),
})
