"""One error base: everything a user can meet is a DcblabError.

The CLI has one ``except DcblabError`` and prints the message as one line
(exit ``exit_code``); library code raises these, it never ``assert``s.
"""

__all__ = ["DcblabError", "UsageError", "ScenarioError"]


class DcblabError(Exception):
    """Base of every error dcblab reports to a user; exit status 1."""

    exit_code = 1


class UsageError(DcblabError):
    """The user asked for something that cannot be (exit status 2)."""

    exit_code = 2


class ScenarioError(DcblabError):
    """A scenario could not produce its result (a tool failed, a sink never
    became ready): not a wrong classification, which is data."""
