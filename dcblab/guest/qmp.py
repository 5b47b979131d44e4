"""QEMU Machine Protocol client: the VM's own control socket."""

import json
import socket
import time

from ..core.errors import DcblabError

__all__ = ["Qmp", "QmpError", "connect"]


class QmpError(DcblabError):
    pass


class Qmp:
    """A QMP session on a unix socket (greeting + qmp_capabilities done)."""

    def __init__(self, path, timeout=5.0):
        self.path = str(path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(self.path)
        except OSError as e:
            self._sock.close()
            raise QmpError(f"cannot connect to QMP socket {self.path}: {e}") \
                from None
        self._file = self._sock.makefile("rb")
        self._read()  # greeting
        self.execute("qmp_capabilities")

    def close(self):
        self._file.close()
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _read(self):
        while True:
            try:
                line = self._file.readline()
            except (OSError, socket.timeout) as e:
                raise QmpError(f"QMP {self.path}: read: {e}") from None
            if not line:
                raise QmpError(f"QMP {self.path}: connection closed")
            msg = json.loads(line)
            if "event" not in msg:
                return msg

    def execute(self, command, arguments=None):
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        self._sock.sendall(json.dumps(msg).encode() + b"\n")
        reply = self._read()
        if "error" in reply:
            raise QmpError(f"QMP {command}: {reply['error'].get('desc')}")
        return reply.get("return")


def connect(path, timeout):
    """A Qmp session, retrying until QEMU has created the socket."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return Qmp(path)
        except QmpError:
            time.sleep(0.01)
    raise QmpError(f"QMP socket {path} not ready within {timeout}s")
