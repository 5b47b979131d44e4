"""What every layer stands on: errors, host commands, paths, flavours, /proc.

Nothing here imports another dcblab package.
"""

from . import paths, proc
from .cmd import CmdError, run
from .errors import DcblabError, ScenarioError, UsageError
from .flavours import FLAVOURS, Flavour, flavour

__all__ = ["paths", "proc", "CmdError", "run", "DcblabError",
           "ScenarioError", "UsageError", "FLAVOURS", "Flavour", "flavour"]
