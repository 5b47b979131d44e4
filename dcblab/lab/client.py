"""A lab's keeper as its clients see it: cheap to import, for the CLI.

``Connection`` is one connection to a keeper's socket; ``KeeperAgent``
gives a guest's agent commands through it; ``LabMachine`` is one guest of
a lab (agent, console log, QEMU pid) and ``attach_guest()`` finds one
from state.json alone, without loading the topology (`dcblab exec`).
"""

import json
import socket
import threading
from pathlib import Path

from ..core import proc
from ..core.errors import UsageError
from ..guest.agent import AgentError, AgentTimeout, Commands
from ..guest.console import Console
from .runs import SOCKET, LabError, keeper_alive, lab_dir, read_state

__all__ = ["Connection", "KeeperAgent", "LabMachine", "attach_guest"]

_ERRORS = {"AgentTimeout": AgentTimeout, "AgentError": AgentError,
           "UsageError": UsageError, "TopologyError": UsageError}


class Connection:
    """One connection to a lab's keeper: a request, its reply."""

    def __init__(self, lab):
        self.lab = lab
        self.sock = None
        self.file = None
        # One request and its reply at a time: threads of one process may
        # share a guest (a probe while the main thread waits for a sender).
        self._lock = threading.RLock()

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = self.file = None

    def _open(self):
        if self.sock is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(lab_dir(self.lab) / SOCKET))
            except OSError as e:
                s.close()
                raise LabError(_unreachable(self.lab, e)) from None
            self.sock, self.file = s, s.makefile("rb")
        return self.sock

    def request(self, req, timeout=None):
        """Send one request; its reply's fields, or the error it names."""
        with self._lock:
            return self._request(req, timeout)

    def _request(self, req, timeout):
        try:
            sock = self._open()
            sock.settimeout(timeout)
            sock.sendall(json.dumps(req).encode() + b"\n")
            line = self.file.readline()
        except socket.timeout:
            self.close()
            raise AgentTimeout(f"lab {self.lab}: no answer to {req['op']} "
                               f"within {timeout}s") from None
        except OSError as e:
            self.close()
            raise LabError(_unreachable(self.lab, e)) from None
        if not line:
            self.close()
            raise LabError(f"lab {self.lab}: its keeper closed the "
                           "connection (stopping?)")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise _ERRORS.get(reply.get("kind"), LabError)(reply["error"])
        return reply

    def next_line(self, timeout):
        self.sock.settimeout(timeout)
        try:
            return self.file.readline()
        except OSError:
            return b""


def _unreachable(name, err):
    try:
        st = read_state(name)
    except LabError as e:
        return str(e)
    if st.get("keeper_pid") and not keeper_alive(st):
        return (f"lab {name}: its keeper (pid {st['keeper_pid']}) is gone: `dcblab reap` "
                "removes what it left")
    return f"lab {name}: cannot reach its keeper ({err})"


class KeeperAgent(Commands):
    """A guest's qemu-guest-agent commands, through the lab's keeper."""

    def __init__(self, lab, host):
        self.lab = lab
        self.name = host
        self._conn = Connection(lab)

    def call(self, command, arguments=None, timeout=10.0):
        req = {"op": "call", "host": self.name, "execute": command,
               "timeout": timeout}
        if arguments is not None:
            req["arguments"] = arguments
        # The keeper bounds the agent's answer; allow for its queue too.
        return self._conn.request(req, timeout=timeout + 10.0).get("return")

    def close(self):
        self._conn.close()


class LabMachine:
    """One guest of a lab, as a client of the lab's keeper sees it."""

    def __init__(self, lab, name, entry):
        self.lab = lab
        self.name = name
        self.rundir = Path(entry["rundir"])
        self.pid = entry["pid"]
        self._log = Path(entry.get("log") or self.rundir / "qemu.log")
        self.console = Console(self.rundir / "console.log", name)
        self.agent = KeeperAgent(lab, name)

    def entry(self):
        return read_state(self.lab)["hosts"][self.name]

    def alive(self):
        try:
            entry = self.entry()
        except (LabError, KeyError):
            return False
        self.pid = entry["pid"]
        if entry.get("machine"):
            # On another machine (docs/scale.md): its keeper watches it.
            return entry["state"] in ("running", "starting")
        return entry["state"] in ("running", "starting") and \
            proc.running(self.pid)

    def log_path(self):
        """The emulator's log, as the backend named it (state.json)."""
        return self._log

    def run(self, argv, **kw):
        return self.agent.run(argv, **kw)




def attach_guest(name, host):
    """Guest HOST of lab NAME, from its state.json; one-line errors."""
    hosts = read_state(name)["hosts"]
    if host not in hosts:
        raise UsageError(f"lab {name}: unknown host \"{host}\" (hosts: "
                         f"{', '.join(sorted(hosts))})")
    return LabMachine(name, host, hosts[host])
