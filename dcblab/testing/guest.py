"""A guest as tests, scenarios and the demo use it: every command is
recorded (with its exit code and duration) for the failure report."""

import time
from dataclasses import dataclass

from ..core.cmd import CmdError

__all__ = ["Guest", "Spawned"]


@dataclass(frozen=True)
class Spawned:
    """A guest process started by Guest.spawn(), collected by Guest.wait()."""
    pid: int
    argv: tuple


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
        try:
            res = self.agent.run(argv, check=check, **kw)
        except Exception as e:
            self._note(argv, f"-> {e!r:.300}")
            raise
        self._note(argv, f"-> rc {res.rc} "
                         f"({(time.monotonic() - t0) * 1000:.0f} ms)")
        return res

    def spawn(self, argv, **kw):
        """Start argv in the guest without waiting for it."""
        pid = self.agent.spawn(argv, **kw)
        self._note(argv, f"& (guest pid {pid})")
        return Spawned(pid, tuple(argv))

    def wait(self, spawned, timeout=30.0, check=True):
        """The Result of a spawned process once it exited."""
        res = self.agent.wait(spawned.pid, list(spawned.argv), timeout)
        self._note(spawned.argv, f"-> rc {res.rc} (guest pid {spawned.pid})")
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
        self.history.append(f"{self.name}: write {path!r} <- {data!r:.200}")
        self.agent.write_file(path, data)

    def _note(self, argv, what):
        self.history.append(f"{self.name}$ {_quote(argv)}  {what}")


def _quote(argv):
    return " ".join(a if a and all(c.isalnum() or c in "-_./=:,@%+" for c in a)
                    else repr(a) for a in argv)
