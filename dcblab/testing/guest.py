"""A guest as tests, scenarios and the demo use it: every command is
recorded (exit code, duration and what it printed) for the failure
report."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from ..core.cmd import CmdError
from ..guest.agent import Commands, Result

if TYPE_CHECKING:
    from ..lab.client import LabMachine

__all__ = ["Guest", "Spawned", "Command", "clip", "KEEP_OUTPUT"]

# Output kept per stream and command: a priosink JSON or a `tc -s -j`
# dump fits whole; a runaway stream keeps its head and its (more telling)
# tail.
KEEP_OUTPUT = 16 * 1024


@dataclass(frozen=True)
class Spawned:
    """A guest process started by Guest.spawn(), collected by Guest.wait()."""
    pid: int
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Command:
    """One entry of a Guest's history.

    ``line`` is the argv as a shell would read it (for a file write by
    the agent: ``write PATH <- DATA``), ``outcome`` what became of it
    (``-> rc 0 (12 ms)``, ``& (guest pid 81)``, the exception), ``rc``
    the exit code once known; stdout and stderr are clipped to
    KEEP_OUTPUT characters each.
    """
    guest: str
    line: str
    outcome: str = ""
    rc: Optional[int] = None
    stdout: str = ""
    stderr: str = ""
    at: float = field(default_factory=time.time)

    def __str__(self) -> str:
        if not self.outcome:                      # a file write
            return f"{self.guest}: {self.line}"
        return f"{self.guest}$ {self.line}  {self.outcome}"


class Guest:
    """A lab machine as tests use it: run() records each command."""

    def __init__(self, machine: LabMachine) -> None:
        self.machine = machine
        self.name: str = machine.name
        self.history: list[Command] = []

    @property
    def agent(self) -> Commands:
        return self.machine.agent

    def alive(self) -> bool:
        return self.machine.alive()

    def run(self, argv: Sequence[str], *, check: bool = True,
            **kw: Any) -> Result:
        """argv in the guest; raises CmdError on rc != 0 unless check=False.

        Keywords go to the agent: ``input=`` (standard input, str or
        bytes), ``timeout=`` (seconds, default 30), ``env=``."""
        t0 = time.monotonic()
        # A command's standard input (an `ip -batch -`'s lines) is part
        # of what it was asked to do.
        stdin = kw.get("input")
        try:
            res = self.agent.run(argv, check=check, **kw)
        except CmdError as e:
            self._note(argv, f"-> rc {e.rc} ({_ms(t0)} ms)", e.rc,
                       e.stdout, e.stderr, stdin)
            raise
        except Exception as e:
            self._note(argv, f"-> {e!r:.300}", stdin=stdin)
            raise
        self._note(argv, f"-> rc {res.rc} ({_ms(t0)} ms)", res.rc,
                   res.stdout, res.stderr, stdin)
        return res

    def spawn(self, argv: Sequence[str], **kw: Any) -> Spawned:
        """Start argv in the guest without waiting for it."""
        pid = self.agent.spawn(argv, **kw)
        self._note(argv, f"& (guest pid {pid})")
        return Spawned(pid, tuple(argv))

    def wait(self, spawned: Spawned, timeout: float = 30.0,
             check: bool = True) -> Result:
        """The Result of a spawned process once it exited."""
        try:
            res = self.agent.wait(spawned.pid, list(spawned.argv), timeout)
        except Exception as e:
            self._note(spawned.argv, f"-> {e!r:.300} (guest pid "
                                     f"{spawned.pid})")
            raise
        self._note(spawned.argv, f"-> rc {res.rc} (guest pid {spawned.pid})",
                   res.rc, res.stdout, res.stderr)
        if check and res.rc != 0:
            raise CmdError(spawned.argv, res.rc, res.stdout, res.stderr,
                           where=self.name)
        return res

    def release(self) -> None:
        """Let go of the guest's agent socket, which takes one client at a
        time, so another client (a `dcblab exec`) can use it; the next
        command reconnects."""
        self.agent.close()

    def read(self, path: str) -> str:
        """A guest file's content as text."""
        return self.agent.read_file(path).decode(errors="replace")

    def write(self, path: str, data: Union[str, bytes]) -> None:
        """Write data to a guest file (created or truncated); up to 48 KiB
        in one write(2)."""
        self.history.append(Command(self.name,
                                    f"write {path} <- {data!r:.200}"))
        self.agent.write_file(path, data)

    def _note(self, argv, outcome, rc=None, stdout="", stderr="",
              stdin=None):
        """One history entry; a standard input is shown as a
        here-document."""
        line = _quote(argv)
        if stdin is not None:
            text = stdin if isinstance(stdin, str) else \
                stdin.decode(errors="replace")
            line += f" <<'EOF'\n{clip(text).rstrip()}\nEOF"
        self.history.append(Command(self.name, line, outcome, rc,
                                    clip(stdout or ""), clip(stderr or "")))


def clip(text: str, limit: int = KEEP_OUTPUT) -> str:
    """text, or its head and tail with a note of what was cut between."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    return (f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n"
            f"{text[-tail:]}")


def _ms(t0):
    return f"{(time.monotonic() - t0) * 1000:.0f}"


def _quote(argv):
    return " ".join(a if a and all(c.isalnum() or c in "-_./=:,@%+" for c in a)
                    else repr(a) for a in argv)
