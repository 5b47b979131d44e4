"""Commands in a guest through qemu-guest-agent (QGA).

The host side of the agent's virtio-serial port is a unix socket.  The
protocol is QEMU's JSON one: ``guest-sync-delimited`` to (re)synchronise
the stream, ``guest-exec`` to start a process with its output captured,
``guest-exec-status`` to collect it, ``guest-file-*`` for files.

``Commands`` holds everything built on one ``call()``; ``Agent`` is the
channel to the agent's socket (the lab keeper holds it); a keeper's
clients reach the same commands through their own ``call()``.
"""

import base64
import json
import os
import random
import socket
import time

from ..core.cmd import CmdError
from ..core.errors import DcblabError

__all__ = ["Agent", "AgentError", "AgentTimeout", "Commands", "Result",
           "STREAM_TOOL"]


class AgentError(DcblabError):
    """The agent answered with an error, or the channel broke."""


class AgentTimeout(AgentError, TimeoutError):
    pass


class Result:
    """What a guest command did: argv, rc, stdout, stderr (text)."""

    __slots__ = ("argv", "rc", "stdout", "stderr")

    def __init__(self, argv, rc, stdout, stderr):
        self.argv, self.rc, self.stdout, self.stderr = argv, rc, stdout, stderr

    def __repr__(self):
        return f"Result(argv={self.argv!r}, rc={self.rc})"


# The guest's wrapper for streamed commands (tools/dcblab-run.c): the
# command leads its own process group, its output goes to two files.
STREAM_TOOL = "/usr/bin/dcblab-run"
_READ = 64 * 1024


def _unknown_pid(err):
    """Whether the agent refused a guest-exec-status because it holds no
    entry for that pid (QEMU 7.2: "Invalid parameter 'pid'"; other
    versions: "PID ... does not exist")."""
    text = str(err)
    return "Invalid parameter 'pid'" in text or "does not exist" in text


def _spawn_failure(err, argv):
    """rc and message for a guest-exec that could not start argv, as a
    shell would give them (127 not found, 126 not executable)."""
    text = str(err)
    if "Failed to execute child process" not in text:
        return None
    if "No such file or directory" in text:
        return 127, f"{argv[0]}: command not found\n"
    return 126, f"{argv[0]}: {text.rsplit('(', 1)[-1].rstrip(')')}\n"


class Commands:
    """Guest commands over ``self.call(command, arguments, timeout)``."""

    name = "guest"

    def call(self, command, arguments=None, timeout=10.0):
        raise NotImplementedError

    def close(self):
        """Drop the channel; the next call opens a new one."""

    def ping(self, timeout):
        """One readiness probe; AgentError if the agent did not answer."""
        raise NotImplementedError

    def wait_ready(self, timeout, alive=None):
        """Block until the agent answers a ping; bounded by ``timeout``."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if alive is not None and not alive():
                raise AgentError(f"{self.name}: QEMU exited before the agent "
                                 f"answered ({last})")
            try:
                self.ping(min(0.5, max(0.05, deadline - time.monotonic())))
                return
            except AgentError as e:
                last = e
                self.close()
                time.sleep(0.02)
        raise AgentTimeout(f"{self.name}: qemu-guest-agent did not answer "
                           f"within {timeout}s (last: {last})")

    # --- commands ----------------------------------------------------------

    def spawn(self, argv, *, input=None, env=None, timeout=30.0):
        """Start argv in the guest without waiting; returns its guest pid."""
        args = {"path": argv[0], "arg": list(argv[1:]),
                "capture-output": True}
        if input is not None:
            data = input.encode() if isinstance(input, str) else input
            args["input-data"] = base64.b64encode(data).decode()
        if env is not None:
            args["env"] = [f"{k}={v}" for k, v in env.items()]
        return self.call("guest-exec", args, timeout=timeout)["pid"]

    def exec(self, argv, *, input=None, timeout=30.0, env=None):
        """Run argv in the guest; return a Result (never raises on rc).
        A program that does not exist gives rc 127, as in a shell."""
        try:
            pid = self.spawn(argv, input=input, env=env, timeout=timeout)
        except AgentError as e:
            failed = _spawn_failure(e, argv)
            if failed is None:
                raise
            return Result(list(argv), failed[0], "", failed[1])
        return self.wait(pid, argv, timeout)

    def status(self, pid, timeout=10.0):
        """guest-exec-status of the process guest-exec just gave PID to.

        qemu-guest-agent keeps an entry per guest-exec, finds it by pid,
        oldest first, and drops it only once a status it sent says
        "exited". A process whose end nobody collected (killed by a
        restore, its waiter gone) leaves such an entry behind, and once
        the guest's pids wrap (pid_max is 4096 on the lab kernel: tinyconfig
        has BASE_SMALL) a new process given the same pid gets the old
        entry's status first: a SIGKILL (137) at once (the cable cut of
        tests/test_wire_faults.py, in CI), or another command's rc and
        output. So an "exited" status is taken only when the agent then
        knows no entry for that pid; if it still has one, the status was
        a stale entry's and the next one is the process's own."""
        st = self.call("guest-exec-status", {"pid": pid}, timeout=timeout)
        while st.get("exited"):
            try:
                newer = self.call("guest-exec-status", {"pid": pid},
                                  timeout=timeout)
            except DcblabError as e:
                if _unknown_pid(e):
                    return st
                raise
            st = newer
        return st

    def kill_group(self, pid, sig="KILL", timeout=10.0):
        """Send SIG to the guest process group PID (a streamed command
        leads its own group, so this reaches what it started too)."""
        # The shell's kill builtin: busybox's kill does not take `--`.
        return self.exec(["sh", "-c", f"kill -{sig} -- -{int(pid)}"],
                         timeout=timeout)

    def stream(self, argv, *, stdout, stderr, input=None, timeout=None,
               env=None):
        """Run argv in the guest through dcblab-run, handing its output
        to ``stdout(bytes)`` and ``stderr(bytes)`` while it runs.

        Returns the exit code: 127/126 if argv cannot be run, 124 after a
        timeout (the command's process group is killed first, as coreutils
        ``timeout`` would), 128+N for a signal. On KeyboardInterrupt the
        group is killed and the interrupt re-raised.
        """
        tag = f"{os.getpid()}-{random.randrange(2**32):08x}"
        files = (f"/tmp/dcblab-exec-{tag}.out", f"/tmp/dcblab-exec-{tag}.err")
        # Our read handles first (mode a+ creates the files); dcblab-run
        # then removes the names, so nothing is left to clean up.
        handles = []
        try:
            for path in files:
                handles.append(self.call("guest-file-open",
                                         {"path": path, "mode": "a+"}))
            args = {"path": STREAM_TOOL,
                    "arg": ["--out", files[0], "--err", files[1], "--unlink",
                            "--", *argv],
                    "capture-output": False}
            if input is not None:
                args["input-data"] = base64.b64encode(input).decode()
            if env is not None:
                args["env"] = [f"{k}={v}" for k, v in env.items()]
            try:
                pid = self.call("guest-exec", args, timeout=10.0)["pid"]
            except AgentError as e:
                if _spawn_failure(e, [STREAM_TOOL]) is None:
                    raise
                raise AgentError(f"{self.name}: no {STREAM_TOOL} in the "
                                 "guest: is the guest image current (`make "
                                 "image`)?") from None
            return self._follow(pid, list(zip(handles, (stdout, stderr))),
                                timeout)
        finally:
            for h in handles:
                self.call("guest-file-close", {"handle": h})

    def _follow(self, pid, sinks, timeout):
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            delay = 0.002
            while True:
                st = self.status(pid)
                got = sum(self._drain(h, sink) for h, sink in sinks)
                if st.get("exited"):
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    self.kill_group(pid)
                    self._reap(pid)
                    for h, sink in sinks:
                        self._drain(h, sink)
                    return 124
                # Quick while output flows, at most 100 ms behind when not.
                delay = 0.002 if got else min(delay * 2, 0.1)
                time.sleep(delay)
        except KeyboardInterrupt:
            self.close()  # a reply may be half read
            self.kill_group(pid)
            self._reap(pid)
            raise
        if "exitcode" in st:
            return st["exitcode"]
        return 128 + st.get("signal", 0)

    def _drain(self, handle, sink):
        """Read what is new in an output file; returns the bytes count."""
        total = 0
        while True:
            r = self.call("guest-file-read", {"handle": handle,
                                              "count": _READ})
            data = base64.b64decode(r.get("buf-b64", ""))
            if data:
                sink(data)
                total += len(data)
            if len(data) < _READ:
                return total

    def _reap(self, pid, timeout=5.0):
        """Collect a killed process's status (the agent keeps it until
        asked)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.status(pid).get("exited"):
                return
            time.sleep(0.01)

    def wait(self, pid, argv, timeout=30.0):
        """Collect a spawned process: its Result once it exited."""
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while True:
            st = self.status(pid,
                             timeout=max(1.0, deadline - time.monotonic()))
            if st.get("exited"):
                break
            if time.monotonic() >= deadline:
                raise AgentTimeout(f"{self.name}: {argv!r} still running "
                                   f"after {timeout}s (guest pid {pid})")
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        out = base64.b64decode(st.get("out-data", "")).decode(errors="replace")
        err = base64.b64decode(st.get("err-data", "")).decode(errors="replace")
        if st.get("out-truncated") or st.get("err-truncated"):
            err += "\n[dcblab: output truncated by qemu-guest-agent]"
        if "exitcode" in st:
            rc = st["exitcode"]
        else:
            rc = 128 + st.get("signal", 0)
        return Result(list(argv), rc, out, err)

    def run(self, argv, *, check=True, **kw):
        """exec() that raises CmdError on a non-zero exit (unless check=False)."""
        res = self.exec(argv, **kw)
        if check and res.rc != 0:
            raise CmdError(argv, res.rc, res.stdout, res.stderr,
                           where=self.name)
        return res

    def read_file(self, path, timeout=10.0):
        h = self.call("guest-file-open", {"path": path, "mode": "r"}, timeout)
        chunks = []
        try:
            while True:
                r = self.call("guest-file-read", {"handle": h,
                                                  "count": 48 * 1024}, timeout)
                chunks.append(base64.b64decode(r.get("buf-b64", "")))
                if r.get("eof") or not r.get("count"):
                    break
        finally:
            self.call("guest-file-close", {"handle": h}, timeout)
        return b"".join(chunks)

    def write_file(self, path, data, timeout=10.0):
        if isinstance(data, str):
            data = data.encode()
        h = self.call("guest-file-open", {"path": path, "mode": "w"}, timeout)
        try:
            for off in range(0, max(len(data), 1), 48 * 1024):
                chunk = data[off:off + 48 * 1024]
                self.call("guest-file-write",
                          {"handle": h,
                           "buf-b64": base64.b64encode(chunk).decode()},
                          timeout)
        finally:
            self.call("guest-file-close", {"handle": h}, timeout)


class Agent(Commands):
    """One connection to one guest's qemu-guest-agent socket."""

    def __init__(self, path, name="guest"):
        self.path = str(path)
        self.name = name
        self._sock = None
        self._buf = b""

    # --- channel -----------------------------------------------------------

    def close(self):
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buf = b""

    def _connect(self):
        if self._sock is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.path)
            except OSError as e:
                s.close()
                raise AgentError(f"{self.name}: cannot connect to agent "
                                 f"socket {self.path}: {e}") from None
            self._sock = s
            self._buf = b""
        return self._sock

    def _send(self, obj):
        data = json.dumps(obj).encode() + b"\n"
        try:
            self._connect().sendall(data)
        except OSError as e:
            self.close()
            raise AgentError(f"{self.name}: agent socket write: {e}") from None

    def _read_message(self, deadline):
        """Next JSON object from the agent; skips 0xff sync delimiters."""
        sock = self._connect()
        while True:
            self._buf = self._buf.lstrip(b"\xff \r\n")
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[:nl], self._buf[nl + 1:]
                line = line.strip(b"\xff \r")
                if not line:
                    continue
                try:
                    return json.loads(line)
                except ValueError:
                    # A half message from before a resync: drop it.
                    continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise AgentTimeout(f"{self.name}: agent did not answer in time")
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                raise AgentTimeout(
                    f"{self.name}: agent did not answer in time") from None
            except OSError as e:
                self.close()
                raise AgentError(f"{self.name}: agent socket read: {e}") \
                    from None
            if not chunk:
                self.close()
                raise AgentError(f"{self.name}: agent socket closed")
            self._buf += chunk

    def sync(self, timeout=2.0):
        """Resynchronise the stream: True once the agent echoed our id."""
        token = random.randrange(1, 2**31)
        deadline = time.monotonic() + timeout
        self._buf = b""
        self._send({"execute": "guest-sync-delimited",
                    "arguments": {"id": token}})
        while True:
            msg = self._read_message(deadline)
            if msg.get("return") == token:
                return True

    def call(self, command, arguments=None, timeout=10.0):
        """One QGA command; returns its "return" value, raises on "error"."""
        msg = {"execute": command}
        if arguments is not None:
            msg["arguments"] = arguments
        if self._sock is None:
            # A new connection may see replies meant for an earlier client:
            # resynchronise before the first command.
            self.sync(timeout=min(timeout, 5.0))
        deadline = time.monotonic() + timeout
        self._send(msg)
        try:
            reply = self._read_message(deadline)
        except AgentTimeout:
            # A late reply would confuse the next call: start over.
            self.close()
            raise AgentTimeout(f"{self.name}: no reply to {command} within "
                               f"{timeout}s") from None
        if "error" in reply:
            err = reply["error"]
            raise AgentError(f"{self.name}: {command}: "
                             f"{err.get('class')}: {err.get('desc')}")
        return reply.get("return")

    def ping(self, timeout):
        """One readiness probe: guest-sync on our own socket."""
        self.sync(timeout=timeout)

    def shutdown(self):
        """Ask the guest to power off; the agent does not answer this one."""
        self._send({"execute": "guest-shutdown",
                    "arguments": {"mode": "powerdown"}})

