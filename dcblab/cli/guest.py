"""Commands that reach into one guest: exec, shell, console, logs, cp,
reset, pcp."""

import fcntl
import json
import os
import select
import shutil
import signal
import socket
import sys
import termios
from pathlib import Path

from ..core.cmd import CmdError
from ..core.errors import UnknownName, UsageError
from ..lab import LabError, attach_guest, read_state
from .common import lab_name, named, note, say, sigterm_as_exit

__all__ = ["add_parsers", "SHELL_TTY"]

# The guest end of the shell port (org.dcblab.shell.0, see
# guest-image/init): the first virtio console.
SHELL_TTY = "/dev/hvc0"
DETACH = b"\x1d"  # Ctrl-]


def _guest(args):
    """The guest, from the lab's state alone: these commands do not load
    the topology, so `dcblab exec` starts quickly."""
    return attach_guest(lab_name(args), args.host)


def cmd_exec(args):
    argv = args.argv
    if not argv:
        raise UsageError("exec: nothing to run: dcblab exec [--name LAB] "
                         "[--timeout S] HOST -- ARGV...")
    m = _guest(args)
    # SIGTERM, as Ctrl-C: the guest's command is killed, then exit 130.
    sigterm_as_exit()
    data = None
    if not args.no_stdin and not os.isatty(0):
        data = sys.stdin.buffer.read()
    out, err = sys.stdout.fileno(), sys.stderr.fileno()
    sys.stdout.flush()
    return m.agent.stream(argv, input=data, timeout=args.timeout,
                          stdout=lambda b: _write_all(out, b),
                          stderr=lambda b: _write_all(err, b))


def _write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def cmd_logs(args):
    m = _guest(args)
    sys.stdout.write(m.console.text())
    return 0


def _connect(path, what):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError as e:
        sock.close()
        raise LabError(f"{what}: cannot connect to {path}: {e.strerror}") \
            from None
    return sock


class _RawTerminal:
    """The local terminal in raw mode (every key, Ctrl-C included, goes to
    the guest) for the lifetime of a with-block; nothing if not a tty."""

    def __init__(self, fd):
        self.fd = fd
        self.tty = os.isatty(fd)
        self.old = None

    def __enter__(self):
        if self.tty:
            self.old = termios.tcgetattr(self.fd)
            new = termios.tcgetattr(self.fd)
            new[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG |
                        termios.IEXTEN)
            new[0] &= ~(termios.ICRNL | termios.IXON)
            new[6][termios.VMIN], new[6][termios.VTIME] = 1, 0
            termios.tcsetattr(self.fd, termios.TCSANOW, new)
        return self

    def __exit__(self, *exc):
        if self.old is not None:
            termios.tcsetattr(self.fd, termios.TCSANOW, self.old)


def _relay(sock, on_winch=None):
    """Copy stdin to sock and sock to stdout until EOF or the detach key.
    Returns True if the user detached."""
    fd = sys.stdin.fileno()
    out = sys.stdout.fileno()
    rpipe, wpipe = os.pipe()
    if on_winch is not None:
        signal.signal(signal.SIGWINCH, lambda *a: os.write(wpipe, b"w"))
    try:
        while True:
            try:
                ready, _, _ = select.select([fd, sock, rpipe], [], [])
            except InterruptedError:
                continue
            if rpipe in ready:
                os.read(rpipe, 64)
                on_winch()
            if sock in ready:
                data = sock.recv(65536)
                if not data:
                    return False
                _write_all(out, data)
            if fd in ready:
                data = os.read(fd, 4096)
                if not data:
                    return False
                if DETACH in data:
                    sock.sendall(data[:data.index(DETACH)])
                    return True
                sock.sendall(data)
    finally:
        if on_winch is not None:
            signal.signal(signal.SIGWINCH, signal.SIG_DFL)
        os.close(rpipe)
        os.close(wpipe)


def cmd_console(args):
    m = _guest(args)
    state = read_state(lab_name(args))
    uri = state.get("backend_info", {}).get("uri")
    machine = state["hosts"].get(args.host, {}).get("machine")
    if machine:
        # On another machine (docs/scale.md): its libvirtd, over ssh.
        uri = state["machines"][machine]["uri"]
    if uri:
        # A libvirt lab: its serial is a pty only libvirt can hand out.
        note(f"{args.host}'s serial console through `virsh -c '{uri}' "
             "console`; detach with Ctrl-]")
        try:
            os.execvp("virsh", ["virsh", "-c", uri, "console", args.host])
        except OSError as e:
            raise LabError(f"virsh: {e.strerror} (Debian package "
                           "libvirt-clients: `make deps`)") from None
    sock = _connect(m.rundir / "console.sock", f"{args.host}'s console")
    note(f"connected to {args.host}'s serial console (kernel messages and a "
         "shell); detach with Ctrl-]")
    try:
        with _RawTerminal(sys.stdin.fileno()):
            sock.sendall(b"\n")
            _relay(sock)
    except OSError as e:
        raise LabError(f"{args.host}: console: {e.strerror}") from None
    finally:
        sock.close()
    note("\ndetached")
    return 0


def _window_size(m):
    if not os.isatty(sys.stdout.fileno()):
        return
    cols, rows = shutil.get_terminal_size()
    m.agent.exec(["stty", "-F", SHELL_TTY, "rows", str(rows), "cols",
                  str(cols)], timeout=10)


def cmd_shell(args):
    m = _guest(args)
    lock = open(m.rundir / "shell.lock", "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        raise LabError(f"{args.host}'s shell is in use by another `dcblab "
                       f"shell` (pid {lock.read().strip() or '?'}); "
                       f"`dcblab exec {args.host} -- ...` works alongside")\
            from None
    lock.truncate(0)
    lock.write(str(os.getpid()))
    lock.flush()
    sock = _connect(m.rundir / "shell.sock", f"{args.host}'s shell")
    try:
        _window_size(m)
        note(f"shell on {args.host} ({SHELL_TTY}); detach with Ctrl-]")
        with _RawTerminal(sys.stdin.fileno()):
            sock.sendall(b"\n")
            _relay(sock, on_winch=lambda: _window_size(m))
    except OSError as e:
        raise LabError(f"{args.host}: shell: {e.strerror}") from None
    finally:
        sock.close()
        # The next `dcblab shell` gets a fresh login shell.
        m.agent.exec(["/sbin/dcblab-shell-reset"], timeout=10)
        lock.close()
    note("\ndetached")
    return 0


def _split_remote(spec):
    host, sep, path = spec.partition(":")
    if sep and host and "/" not in host:
        return host, path
    return None, spec


def cmd_cp(args):
    (src_host, src), (dst_host, dst) = map(_split_remote, (args.src,
                                                           args.dst))
    if (src_host is None) == (dst_host is None):
        raise UsageError("cp: exactly one of SRC and DST must be HOST:PATH "
                         "(e.g. `dcblab cp h2:/tmp/x.pcap .`)")
    args.host = src_host or dst_host
    m = _guest(args)
    if src_host:
        data = m.agent.read_file(src)
        target = Path(dst)
        if target.is_dir():
            target = target / Path(src).name
        target.write_bytes(data)
        say(f"{src_host}:{src} -> {target} ({len(data)} bytes)")
    else:
        path = Path(src)
        if not path.is_file():
            raise UsageError(f"cp: {src}: not a regular file")
        data = path.read_bytes()
        if dst.endswith("/"):
            dst += path.name
        m.agent.write_file(dst, data)
        if os.access(path, os.X_OK):
            m.agent.run(["chmod", "755", dst])
        say(f"{src} -> {dst_host}:{dst} ({len(data)} bytes)")
    return 0


def cmd_reset(args):
    from ..lab import Lab, baseline_devices, reset_baseline
    from ..lab.dcbstate import reset_host_dcb, reset_switch_dcb
    lab = Lab.attach(lab_name(args))
    # All names checked before any host is touched; switches first: the
    # hosts facing them take their DCB from them.
    pairs = sorted(((lab.machine(h), lab.topology.host(h))
                    for h in dict.fromkeys(args.hosts)),
                   key=lambda mh: not mh[1].is_switch)
    dcbx = lab.topology.dcbx
    rc = 0
    for m, host in pairs:
        lines, failed = reset_baseline(m, host, dcbx), []
        if host.is_switch:
            lines += reset_switch_dcb(m, host, dcbx)
        elif dcbx:
            done, failed = reset_host_dcb(m, host, lab.topology, lab)
            lines += done
        for line in lines:
            say(f"{host.name}: {line}")
        if failed:
            for line in failed:
                print(f"dcblab reset: {host.name}: {line}", file=sys.stderr)
            rc = 1
            continue
        dcb = [n.name for n in host.nics if n.dcb or
               (dcbx and n.peer_is_switch)]
        say(f"{host.name}: at the topology's baseline (devices "
            f"{', '.join(baseline_devices(host))}"
            f"{'; DCB of ' + ', '.join(dcb) if dcb else ''})")
    return rc


def _pcp_counts(m, dev):
    from ..testing.traffic import pcp_packets  # only `pcp` needs it
    try:
        return pcp_packets(m, dev)
    except CmdError as e:
        if "Cannot find device" in e.stderr:
            raise
        return {}  # no clsact on dev yet


def _no_device(host, dev):
    """The one line for a --dev the guest does not have."""
    from ..lab import baseline_devices
    return UnknownName(f"pcp: {host.name} has no device {json.dumps(dev)} "
                       f"(its devices: {', '.join(baseline_devices(host))}): "
                       "name one with --dev")


def cmd_pcp(args):
    from ..topology import load
    m = _guest(args)
    host = load(read_state(lab_name(args))["topology"]).host(args.host)
    ports = ", ".join(n.name for n in host.nics)
    if host.is_switch:
        # Its ports count every frame per PCP in their trust filters
        # (dcblab.lab.switch): there is nothing to arm, nor one VLAN.
        if args.dev is None:
            raise UsageError(f"pcp: {host.name} is a switch: it has no "
                             f"eth0; name one of its ports ({ports}) with "
                             f"--dev, e.g. `dcblab pcp {host.name} --dev "
                             f"{host.nics[0].name}`")
        for given, what in ((args.rearm, "--rearm"),
                            (args.vlan is not None, "--vlan")):
            if given:
                raise UsageError(f"pcp {what}: {host.name} is a switch: "
                                 "its ports' trust filters count every "
                                 "VLAN from its setup on; they are not "
                                 "armed by pcp")
    dev = args.dev or "eth0"
    vlan = None if host.is_switch else \
        (100 if args.vlan is None else args.vlan)
    try:
        counts = _pcp_counts(m, dev)
        armed = False
        if host.is_switch and not counts:
            raise UsageError(f"pcp: {host.name} {dev} has no per-PCP "
                             f"counters: a switch counts on its ports' "
                             f"ingress ({ports})")
        if args.rearm or not counts:
            if args.rearm:
                m.run(["tc", "qdisc", "del", "dev", dev, "clsact"],
                      check=False)
            from ..testing.traffic import pcp_filters
            pcp_filters(m, dev, vlan)
            counts = _pcp_counts(m, dev)
            armed = True
    except CmdError as e:
        if "Cannot find device" in e.stderr:
            raise _no_device(host, dev) from None
        raise
    if args.json:
        print(json.dumps({"host": args.host, "dev": dev, "vlan": vlan,
                          "armed_now": armed,
                          "pcp": [counts.get(p, 0) for p in range(8)]}))
        return 0
    if armed:
        note(f"{args.host}: armed per-PCP counters on {dev} ingress "
             f"(tc flower vlan_id {vlan} vlan_prio 0..7); run again to "
             "read them, `dcblab reset` removes them")
    if host.is_switch:
        say(f"{args.host} {dev} ingress, every VLAN (the switch's trust "
            "filters): frames per PCP")
    else:
        say(f"{args.host} {dev} ingress, VLAN {vlan}: frames per PCP")
    say("  " + " ".join(f"{p:>7}" for p in range(8)))
    say("  " + " ".join(f"{counts.get(p, 0):>7}" for p in range(8)))
    return 0


def add_parsers(sub):
    p = named(sub.add_parser(
        "exec", help="run ARGV in a guest; its output (streamed), stdin and "
                     "exit code are dcblab's",
        usage="dcblab exec [--name LAB] [--timeout S] [-n] HOST -- ARGV..."))
    p.add_argument("host")
    p.add_argument("argv", nargs="*", help="-- ARGV...")
    p.add_argument("--timeout", type=float, default=None,
                   help="kill the command's process group after S seconds "
                        "and exit 124 (default: no limit)")
    p.add_argument("-n", "--no-stdin", action="store_true",
                   help="do not pass stdin (it is read to EOF otherwise, "
                        "unless it is a terminal)")
    p.set_defaults(func=cmd_exec)
    for name, func, text in (
            ("shell", cmd_shell, "interactive login shell on a guest (a "
                                 "tty: job control, Ctrl-C; detach: Ctrl-])"),
            ("console", cmd_console, "interactive serial console (detach: "
                                     "Ctrl-])"),
            ("logs", cmd_logs, "print a guest's captured console")):
        p = named(sub.add_parser(name, help=text))
        p.add_argument("host")
        p.set_defaults(func=func)
    p = named(sub.add_parser("reset", help="put guests back to the "
                                           "topology's baseline (a "
                                           "switch's DCB too)"))
    p.add_argument("hosts", nargs="+", metavar="HOST")
    p.set_defaults(func=cmd_reset)
    p = named(sub.add_parser("cp", help="copy a file to or from a guest: "
                                        "cp SRC HOST:PATH, cp HOST:PATH DST"))
    p.add_argument("src")
    p.add_argument("dst")
    p.set_defaults(func=cmd_cp)
    p = named(sub.add_parser("pcp", help="frames per 802.1p PCP received on "
                                         "a guest (arms the counters the "
                                         "first time)"))
    p.add_argument("host")
    p.add_argument("--dev", help="device (default eth0; on a switch one of "
                                 "its ports, swpN, must be named)")
    p.add_argument("--vlan", type=int,
                   help="VLAN id to count (default 100; a switch's ports "
                        "count every VLAN)")
    p.add_argument("--rearm", action="store_true",
                   help="remove the counters and arm them again (zero)")
    p.add_argument("-j", "--json", action="store_true", help="JSON output")
    p.set_defaults(func=cmd_pcp)
