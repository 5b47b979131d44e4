"""What every layer stands on: errors, host commands, paths, flavours, /proc.

Nothing here imports another dcblab package. Names are imported on first
use (see lazy.py).
"""

from .lazy import surface

__all__, __getattr__, __dir__ = surface(__name__, {
    "paths": ("paths",),
    "proc": ("proc",),
    "cmd": ("CmdError", "run"),
    "errors": ("DcblabError", "ScenarioError", "UnknownName", "UsageError"),
    "flavours": ("FLAVOURS", "Flavour", "flavour"),
    "remote": ("Here", "Ssh", "ssh_base", "SSH_CONFIG_ENV"),
})
