"""A guest as tests, scenarios and the demo use it: every command is
recorded (exit code, duration and what it printed) for the failure
report."""

import time
from dataclasses import dataclass, field

from ..core.cmd import CmdError

__all__ = ["Guest", "Spawned", "Command", "clip", "KEEP_OUTPUT"]

# Output kept per stream and command: a priosink JSON or a `tc -s -j`
# dump fits whole; a runaway stream keeps its head and its (more telling)
# tail.
KEEP_OUTPUT = 16 * 1024


@dataclass(frozen=True)
class Spawned:
    """A guest process started by Guest.spawn(), collected by Guest.wait()."""
    pid: int
    argv: tuple


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
    rc: object = None
    stdout: str = ""
    stderr: str = ""
    at: float = field(default_factory=time.time)

    def __str__(self):
        if not self.outcome:                      # a file write
            return f"{self.guest}: {self.line}"
        return f"{self.guest}$ {self.line}  {self.outcome}"


class Guest:
    """A lab machine as tests use it: run() records each command."""

    def __init__(self, machine):
        self.machine = machine
        self.name = machine.name
        self.history = []

    @property
    def agent(self):
        return self.machine.agent

    def alive(self):
        return self.machine.alive()

    def run(self, argv, *, check=True, **kw):
        """argv in the guest; raises CmdError on rc != 0 unless check=False."""
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

    def spawn(self, argv, **kw):
        """Start argv in the guest without waiting for it."""
        pid = self.agent.spawn(argv, **kw)
        self._note(argv, f"& (guest pid {pid})")
        return Spawned(pid, tuple(argv))

    def wait(self, spawned, timeout=30.0, check=True):
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

    def release(self):
        """Let go of the guest's agent socket, which takes one client at a
        time, so another client (a `dcblab exec`) can use it; the next
        command reconnects."""
        self.agent.close()

    def read(self, path):
        return self.agent.read_file(path).decode(errors="replace")

    def write(self, path, data):
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


def clip(text, limit=KEEP_OUTPUT):
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
