"""Commands that reach into one guest: exec, console, logs."""

import os
import select
import socket
import sys
import termios

from ..core.errors import UsageError
from ..guest import AgentError
from ..lab import Lab, LabError
from .common import lab_name, named, say

__all__ = ["add_parsers"]


def cmd_exec(args):
    argv = args.argv
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise UsageError("exec: nothing to run: dcblab exec HOST -- ARGV...")
    lab = Lab.attach(lab_name(args))
    m = lab.machine(args.host)
    try:
        res = m.agent.exec(argv, timeout=args.timeout)
    except AgentError as e:
        raise LabError(f"{e} (another client, e.g. a pytest session, may "
                       "hold this guest's agent socket)") from None
    sys.stdout.write(res.stdout)
    sys.stdout.flush()
    sys.stderr.write(res.stderr)
    return res.rc


def cmd_logs(args):
    lab = Lab.attach(lab_name(args))
    sys.stdout.write(lab.machine(args.host).console.text())
    return 0


def _connect(path, host):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError as e:
        sock.close()
        raise LabError(f"{host}: cannot connect to the serial console "
                       f"{path}: {e.strerror}") from None
    return sock


def cmd_console(args):
    lab = Lab.attach(lab_name(args))
    m = lab.machine(args.host)
    sock = _connect(m.rundir / "console.sock", args.host)
    say(f"connected to {args.host}'s serial console; detach with Ctrl-]")
    fd = sys.stdin.fileno()
    tty = os.isatty(fd)
    if tty:
        old = termios.tcgetattr(fd)
        new = termios.tcgetattr(fd)
        new[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG)
        new[0] &= ~(termios.ICRNL | termios.IXON)
        termios.tcsetattr(fd, termios.TCSANOW, new)
    try:
        while True:
            ready, _, _ = select.select([fd, sock], [], [])
            if sock in ready:
                data = sock.recv(4096)
                if not data:
                    break
                os.write(sys.stdout.fileno(), data)
            if fd in ready:
                data = os.read(fd, 1024)
                if not data or b"\x1d" in data:
                    break
                sock.sendall(data)
    except OSError as e:
        raise LabError(f"{args.host}: console: {e.strerror}") from None
    finally:
        if tty:
            termios.tcsetattr(fd, termios.TCSANOW, old)
        sock.close()
    say("\ndetached")
    return 0


def add_parsers(sub):
    p = named(sub.add_parser("exec", help="run ARGV in a guest; its output "
                                          "and exit code become dcblab's"))
    p.add_argument("host")
    p.add_argument("argv", nargs="...", help="-- ARGV...")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds (default 60)")
    p.set_defaults(func=cmd_exec)
    p = named(sub.add_parser("console", help="interactive serial console "
                                             "(detach: Ctrl-])"))
    p.add_argument("host")
    p.set_defaults(func=cmd_console)
    p = named(sub.add_parser("logs", help="print a guest's captured console"))
    p.add_argument("host")
    p.set_defaults(func=cmd_logs)
