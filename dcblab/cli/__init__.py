"""The command line (bin/dcblab): one module per command group."""

from .main import main, parser

__all__ = ["main", "parser"]
