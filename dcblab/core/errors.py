"""One error base: everything a user can meet is a DcblabError.

The CLI has one ``except DcblabError`` and prints the message as one line
(exit ``exit_code``); library code raises these, it never ``assert``s.

Exit status: 2 when what the user typed cannot be, a name that names
nothing included (an unknown lab, host, link, switch port or device, a bad
value, option or topology file); 1 when a valid request failed while it
ran (a guest died, a command failed, no lab is up to pick one from).
"""

__all__ = ["DcblabError", "UsageError", "UnknownName", "ScenarioError"]


class DcblabError(Exception):
    """Base of every error dcblab reports to a user; exit status 1."""

    exit_code = 1


class UsageError(DcblabError):
    """The user asked for something that cannot be (exit status 2)."""

    exit_code = 2


class UnknownName(UsageError):
    """A name the user gave (a lab, host, link, switch port, device) names
    nothing there is: exit status 2, whichever command met it."""


class ScenarioError(DcblabError):
    """A scenario could not produce its result (a tool failed, a sink never
    became ready): not a wrong classification, which is data."""
