"""A dcblab command on a pseudo-terminal, as a user at a terminal runs it
(`dcblab shell`, `dcblab console`): shared by the tests that attach to a
guest (test_guest_cli.py, test_fabric_split.py)."""

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time

from dcblab.core.paths import ROOT

__all__ = ["Pty", "attached", "console_shell", "DCBLAB"]

DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]


class Pty:
    """A dcblab command on a pseudo-terminal of rows x cols."""

    def __init__(self, argv, rows=40, cols=132):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(sys.executable, [sys.executable, *argv[1:]])
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ,
                    struct.pack("HHHH", rows, cols, 0, 0))
        self.buf = b""

    def expect(self, pattern, timeout=30):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.buf)
            if m:
                self.buf = self.buf[m.end():]
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} in {self.buf[-500:]!r}")
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    self.buf += os.read(self.fd, 4096)
                except OSError:
                    raise AssertionError(f"EOF before {pattern!r}: "
                                         f"{self.buf[-500:]!r}") from None

    def send(self, data):
        os.write(self.fd, data)

    def close(self, timeout=15):
        """The command's exit code; killed (and a failure) if it has not
        exited within timeout, so a failed expect cannot hang the suite."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    return os.waitstatus_to_exitcode(status)
                if time.monotonic() > deadline:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    raise AssertionError(f"still running after {timeout}s "
                                         f"(killed): {self.buf[-500:]!r}")
                time.sleep(0.05)
        finally:
            os.close(self.fd)


@contextlib.contextmanager
def attached(lab, command, host):
    """`dcblab COMMAND HOST` on a pty; detached (Ctrl-]) at the end, which
    must end it with exit 0."""
    term = Pty(DCBLAB + [command, "--name", lab.name, host])
    try:
        yield term
        term.send(b"\x1d")
    finally:
        rc = term.close()
    assert rc == 0


def console_shell(con, timeout=30):
    """Type into an attached `dcblab console` until the serial's shell
    answers (on a libvirt lab `virsh console` drops what was typed before
    it had the pty in raw mode), then check it computes."""
    deadline = time.monotonic() + timeout
    while True:
        con.send(b"tty; echo $((7*6))\r")
        try:
            con.expect(rb"/dev/ttyS0", timeout=2)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
    con.expect(rb"42")
