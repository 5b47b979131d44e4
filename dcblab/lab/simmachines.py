"""Several machines simulated on this one, reached by ssh: the CI of a lab
split across machines (issue 28) without a second machine.

Each machine is one holder process, ``unshare --net --mount --uts --pid
--fork --kill-child --propagation private -- sh -c _MACHINE_SCRIPT ...``,
started in a session of its own with the run tag ``dcblab.run=RUNID`` on
its argv (the unshare process and its child both carry it, so
``dcblab.lab.reaper.run_pids(run_id)`` finds them). The child makes the
machine and becomes its init (_MACHINE_INIT), and the machine is its
namespaces:

* its own network namespace, ``lo`` up, and ``dc0``, its port on the
  data-centre network, 198.18.0.(i+1)/24 for the i-th machine (RFC 2544's
  benchmarking range, as topology/dcb-fabric-split.toml expects);
* its own mount namespace (private propagation: nothing it mounts reaches
  the host) with a fresh tmpfs on /run holding only /run/sshd, an empty
  /run/dcblab, /run/lock and, bound at its same path, the sim's directory
  (its sshd_config and keys; /var/run is /run's symlink on Debian, so it
  follows), a sysfs of its own network namespace on /sys (the host's
  cgroup mounts bound back under it), a /proc of its own, and an empty
  tmpfs on /root (a machine's root has its own dotfiles: this host's
  .bashrc, which every ssh command's shell reads, took 1 s per command
  here); every other path (/tmp, /etc, the checkout, the build
  directory) is the host's, as on machines sharing one file server;
* its own PID namespace: ``pgrep`` or the reaper's scan of /proc run
  there see that machine's processes only, as on a real one, and when
  its init ends, whatever still runs there (a session, a lab's QEMU)
  is killed by the kernel;
* its own UTS namespace: ``hostname`` says its name.

The init says ``ready HOSTPID`` and waits for its stdin to close: closing
it is ``down()``, and the owner's death closes it too, so the machines
never outlive the process that made them. If the holder is killed
instead (by run id: SIGTERM, SIGKILL), the init ends with it
(``--kill-child``; it also takes SIGTERM itself).

The data-centre network is one bridge, ``dcbr``, in a switch network
namespace held by one more tagged process (``unshare --net``), with one
veth pair per machine: ``dc-NAME`` on the bridge, ``dc0`` in the
machine; the same for two machines as for more, so one path is tested.
No namespace is bound on a file and nothing is mounted in the host's
mount namespace: every namespace lives exactly as long as the processes
in it, and the host's root network namespace never holds a device, even
for a moment (each veth pair is made in the switch's namespace with its
peer created straight in the machine's). IPv6 is off in the switch's
namespace, so the bridge itself sends nothing onto the network.

sshd listens nowhere. ssh reaches a machine through its
``ProxyCommand``: ``nsenter -t INITPID -n -m -p -u -- /usr/sbin/sshd -i
-e -f SIMDIR/sshd_config`` runs one sshd per connection, in inetd mode
over ssh's pipes, inside the machine's namespaces, where /run/sshd (its
privilege separation directory) exists on the machine's own /run.
nsenter runs with SIGHUP ignored (``env --ignore-signal=HUP``, sshd
with it back to default): ssh sends its ProxyCommand a SIGHUP as it
exits, and an nsenter that died then left its sshd, in the machine's
PID namespace, to this host's init, whose late reaping held up the
machine's end by a second or more. The
sim's directory, ``run_root()/sim-NAME`` (0700), holds one host key and
one client key made for the sim, sshd_config, authorized_keys,
known_hosts (the host key under every machine's name: strict host key
checking works) and ssh_config, one ``Host NAME`` block per machine, so
``ssh -F SIMDIR/ssh_config a -- CMD`` (or DCBLAB_SSH_CONFIG=SIMDIR/
ssh_config for dcblab.core.remote) runs CMD on machine a.

The directory's ``lock`` is held (flock) by the owner and the holders, so
`dcblab reap` leaves a live sim alone and removes a dead one's directory,
which is all a dead sim leaves.
"""

import fcntl
import ipaddress
import os
import re
import select
import shlex
import shutil
import subprocess
import uuid
from pathlib import Path

from ..core import proc
from ..core.cmd import CmdError, run as run_cmd
from ..core.errors import DcblabError, UsageError
from .runs import LOCK, remove_run_root, run_root, run_tag

__all__ = ["SimMachines", "SimError", "leftovers", "SSHD", "DC_NETWORK",
           "DC_DEVICE", "DC_BRIDGE", "DEFAULT_MTU"]

SSHD = "/usr/sbin/sshd"
DC_NETWORK = ipaddress.IPv4Network("198.18.0.0/24")
DC_DEVICE = "dc0"
DC_BRIDGE = "dcbr"
DEFAULT_MTU = 9000
# Debian's, which make deps installs: the machines' init. Not
# sys.executable, which may live below /root (pyenv), the machine's own.
_PYTHON = "/usr/bin/python3"
_INSTALL = "install openssh-server (`make deps`)"
# Machine names: an ssh Host (no pattern characters), a hostname, and,
# after "dc-", a device name of at most 15 characters.
_MACHINE = re.compile(r"^[a-z][a-z0-9-]{0,11}$")
_SIM = re.compile(r"^[a-z0-9][a-z0-9-]{0,15}$")
_READY_TIMEOUT = 10.0
_STOP_TIMEOUT = 10.0

# The machine's init: $1 the sim's directory, $2 this machine's staging
# directory in it, $3 the machine's name, $4 the run tag (for /proc),
# $5 the Python and $6 the code it runs as the init (_MACHINE_INIT).
# Mounts are made on the staging directory and moved into place, so that
# the sim's directory, below the host's /run, can still be bound into the
# new /run; mount -n: util-linux's utab stays out of it.
_MACHINE_SCRIPT = r"""
set -e
D=$1 S=$2
read -r hostpid _ </proc/self/stat
echo "$3" >/proc/sys/kernel/hostname
mount -n -t proc dcblab-sim-proc /proc
mount -n -t sysfs dcblab-sim-sys "$S/sys"
if [ -n "$(ls -A /sys/fs/cgroup 2>/dev/null)" ]; then
    mount -n --rbind /sys/fs/cgroup "$S/sys/fs/cgroup"
fi
mount -n --move "$S/sys" /sys
mount -n -t tmpfs -o mode=0755,size=10% dcblab-sim-run "$S/run"
mkdir -m 0755 "$S/run/sshd" "$S/run/dcblab"
mkdir -m 1777 "$S/run/lock"
case $D in /run/*)
    mkdir -p "$S/run${D#/run}"
    mount -n --bind "$D" "$S/run${D#/run}";;
esac
mount -n --move "$S/run" /run
mount -n -t tmpfs -o mode=0700,size=1% dcblab-sim-root /root
ip link set lo up
exec "$5" -I -S -c "$6" "$hostpid" "$4"
"""

# What the machine's init becomes once the machine is made. An init must
# reap the orphans adopted from the whole machine (every ssh session
# leaves one: sshd's privilege separation child), and a shell waiting in
# `read` never does: their zombies piled up, and the init's exit waited a
# second for them. SIGCHLD ignored, the kernel reaps them at once.
# SIGTERM handled: an init takes no signal it has no handler for, and the
# reaper stops a dead sim's holders by run id with SIGTERM.
_MACHINE_INIT = r"""
import signal, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("ready", sys.argv[1], flush=True)
sys.stdin.buffer.read()
"""

# The switch: a network namespace and nothing else.
_SWITCH_SCRIPT = r"""
echo "ready $$"
read -r _ || :
"""

_SSHD_CONFIG = """\
# sshd of sim {sim} (dcblab.lab.simmachines): run per connection as
# `sshd -i` inside a machine's namespaces; no port, no PAM, no password.
HostKey {dir}/ssh_host_ed25519_key
AuthorizedKeysFile {dir}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
PrintLastLog no
PidFile none
LogLevel ERROR
AllowStreamLocalForwarding yes
AllowTcpForwarding yes
Subsystem sftp internal-sftp
# No AcceptEnv: a client's environment is never taken.
"""

_SSH_HOST = """\
Host {name}
  HostName {name}
  User root
  IdentityFile {dir}/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile {dir}/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  UpdateHostKeys no
  BatchMode yes
  LogLevel ERROR
  # Not the default post-quantum sntrup761 (nothing leaves this host):
  # 0.1 s less per connection.
  KexAlgorithms curve25519-sha256
  ProxyCommand {proxy}
"""


class SimError(DcblabError):
    """Simulated machines could not be brought up, or a command on them
    failed to set them up."""


def _tag(run_id):
    return run_tag(run_id)


def _ns_id(pid, kind):
    """(device, inode) of process PID's namespace KIND, or None."""
    try:
        st = os.stat(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _stragglers(netns, pidns, holder):
    """Pids in the network namespace NETNS but not in the PID namespace
    PIDNS (whose processes die with its init), the holder HOLDER aside:
    what entered a machine with `nsenter -n` alone."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != holder and \
                _ns_id(d.name, "net") == netns and \
                (pidns is None or _ns_id(d.name, "pid") != pidns):
            found.append(int(d.name))
    return found


def _one_line(e):
    if isinstance(e, CmdError):
        said = [x.strip() for x in (e.stderr or e.stdout or "").splitlines()
                if x.strip()]
        words = shlex.join(e.argv[:6]) + (" ..." if len(e.argv) > 6 else "")
        return (f"{e.where}: `{words}` exited {e.rc}" +
                (f": {said[-1]}" if said else ""))
    return " ".join(str(e).split()) or type(e).__name__


class _Holder:
    """One tagged holder process: a machine or the switch."""

    def __init__(self, what, argv, log, lock_fd):
        self.what = what
        self.log = log
        with open(log, "wb") as err:
            self.popen = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, pass_fds=(lock_fd,), start_new_session=True)
        self.pid = None

    def ready(self, timeout=_READY_TIMEOUT):
        """Wait for the "ready PID" line; the pid it gives (the init's,
        seen from here)."""
        out = self.popen.stdout
        ready, _, _ = select.select([out], [], [], timeout)
        line = out.readline().decode(errors="replace") if ready else ""
        words = line.split()
        if len(words) == 2 and words[0] == "ready" and words[1].isdigit():
            self.pid = int(words[1])
            return self.pid
        if not ready:
            raise SimError(f"{self.what} did not say ready within "
                           f"{timeout:.0f}s ({self._tail()})")
        raise SimError(f"{self.what} exited before it was ready "
                       f"({self._tail()})")

    def _tail(self):
        try:
            lines = [x for x in self.log.read_text(errors="replace")
                     .splitlines() if x.strip()]
        except OSError:
            lines = []
        return lines[-1].strip() if lines else "no output"

    def stop(self):
        """Close its stdin (the init returns, the kernel kills what is
        left in the machine); SIGTERM then SIGKILL if it does not end."""
        p = self.popen
        for f in (p.stdin, p.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            p.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill([p.pid])
            p.wait()


class SimMachines:
    """Machines NAMES simulated on this one (see the module's doc)."""

    def __init__(self, names: tuple[str, ...] | list[str] = ("a", "b"),
                 name: str = "sim", mtu: int = DEFAULT_MTU) -> None:
        names = tuple(names)
        if not _SIM.match(name):
            raise UsageError(f"sim name {name!r} must match {_SIM.pattern} "
                             "(it names its run directory)")
        bad = [n for n in names if not _MACHINE.match(n)]
        if bad:
            raise UsageError(f"sim {name}: machine name {bad[0]!r} must "
                             f"match {_MACHINE.pattern} (an ssh host, a "
                             "hostname, a device name after dc-)")
        if len(set(names)) != len(names):
            raise UsageError(f"sim {name}: a machine is named twice in "
                             f"{list(names)}")
        if not 2 <= len(names) <= DC_NETWORK.num_addresses - 3:
            raise UsageError(f"sim {name}: {len(names)} machine(s); give "
                             f"2 to {DC_NETWORK.num_addresses - 3}")
        if not isinstance(mtu, int) or not 68 <= mtu <= 65535:
            raise UsageError(f"sim {name}: MTU {mtu!r} is not an IPv4 "
                             "MTU a veth takes (68 to 65535)")
        self.names = names
        self.name = name
        self.mtu = mtu
        self._run_id = uuid.uuid4().hex[:12]
        self._dir = run_root() / f"sim-{name}"
        self._holders = {}
        self._switch = None
        self._undo = []
        self._lock_fd = None
        self._is_up = False

    # --- what it is ---------------------------------------------------------

    @property
    def dir(self) -> Path:
        """The sim's run directory: keys, configs, holders' logs."""
        return self._dir

    @property
    def ssh_config(self) -> Path:
        """The ssh client configuration naming every machine."""
        return self._dir / "ssh_config"

    @property
    def run_id(self) -> str:
        """The run id every process of the sim carries on its argv."""
        return self._run_id

    @property
    def tag(self) -> str:
        """``dcblab.run=RUNID``: the word on the argv of its holders."""
        return _tag(self._run_id)

    def address(self, name: str) -> str:
        """Machine NAME's address on the data-centre network."""
        return str(DC_NETWORK[self._index(name) + 1])

    def pid(self, name: str) -> int:
        """Host pid of machine NAME's init (the target of nsenter -t)."""
        self._index(name)
        if name not in self._holders or self._holders[name].pid is None:
            raise SimError(f"sim {self.name}: machine {name} is not up")
        return self._holders[name].pid

    def _index(self, name):
        try:
            return self.names.index(name)
        except ValueError:
            raise UsageError(f"sim {self.name}: no machine {name!r} "
                             f"(machines: {', '.join(self.names)})") \
                from None

    # --- running things -----------------------------------------------------

    def ssh_argv(self, name: str, argv: list[str]) -> list[str]:
        """ARGV run on machine NAME through ssh (quoted for its shell)."""
        self._index(name)
        return ["ssh", "-F", str(self.ssh_config), name, "--",
                shlex.join(argv)]

    def run(self, name: str, argv: list[str], *, check: bool = True,
            **kw) -> subprocess.CompletedProcess:
        """Run ARGV on machine NAME through ssh, as dcblab.core.cmd.run
        runs it here; a failure's CmdError names the machine."""
        r = run_cmd(self.ssh_argv(name, argv), check=False, **kw)
        if check and r.returncode != 0:
            raise CmdError(argv, r.returncode, r.stdout, r.stderr,
                           where=f"sim machine {name} (ssh)")
        return r

    def in_machine_argv(self, name: str, argv: list[str]) -> list[str]:
        """ARGV run in machine NAME's namespaces without ssh (nsenter):
        for looking inside, and for what sets the machines up."""
        return ["nsenter", "-t", str(self.pid(name)), "-n", "-m", "-p", "-u",
                "--", *argv]

    def in_switch_argv(self, argv: list[str]) -> list[str]:
        """ARGV run in the switch's network namespace (the bridge and the
        machines' far ends, dc-NAME)."""
        if self._switch is None or self._switch.pid is None:
            raise SimError(f"sim {self.name}: it is not up")
        return ["nsenter", "-t", str(self._switch.pid), "-n", "--", *argv]

    def _in_machine(self, name, argv, **kw):
        return run_cmd(self.in_machine_argv(name, argv), **kw)

    def _in_switch(self, argv, **kw):
        return run_cmd(self.in_switch_argv(argv), **kw)

    # --- the network --------------------------------------------------------

    def set_mtu(self, mtu: int) -> None:
        """MTU of both ends of every machine's link to the switch (the
        bridge follows its ports)."""
        if not isinstance(mtu, int) or not 68 <= mtu <= 65535:
            raise UsageError(f"sim {self.name}: MTU {mtu!r} is not an IPv4 "
                             "MTU a veth takes (68 to 65535)")
        self._in_switch(["ip", "-batch", "-"], input="".join(
            f"link set dev dc-{n} mtu {mtu}\n" for n in self.names))
        for n in self.names:
            self._in_machine(n, ["ip", "link", "set", "dev", DC_DEVICE,
                                 "mtu", str(mtu)])
        self.mtu = mtu

    def netem(self, name: str, *args: str) -> None:
        """netem ARGS (``delay 5ms``, ``loss 1%``) on machine NAME's dc0,
        replacing what was there. The machines run on this host's kernel:
        SimError if it has no sch_netem (dcblab loads no module)."""
        argv = ["tc", "qdisc", "replace", "dev", DC_DEVICE, "root",
                "netem", *args]
        r = self._in_machine(name, argv, check=False)
        if r.returncode == 0:
            return
        if "qdisc kind is unknown" in r.stderr:
            raise SimError(f"sim {self.name}: machine {name}: this host's "
                           "kernel has no netem qdisc (CONFIG_NET_SCH_NETEM"
                           "; dcblab loads no module): run on one that has "
                           "it built in or loaded")
        raise CmdError(argv, r.returncode, r.stdout, r.stderr,
                       where=f"sim machine {name}")

    def shape(self, name: str, rate: str, burst: str = "4k",
              latency: str = "20ms") -> None:
        """A token bucket (tbf) of RATE on machine NAME's dc0, replacing
        what was there: a congested data-centre network, which drops
        what exceeds it. Every kernel dcblab runs on has tbf; this host's
        has no netem. clear_netem() removes it."""
        self._in_machine(name, ["tc", "qdisc", "replace", "dev", DC_DEVICE,
                                "root", "tbf", "rate", rate, "burst", burst,
                                "latency", latency])

    def clear_netem(self, name: str) -> None:
        """Machine NAME's dc0 back to its default qdisc (after netem() or
        shape()); idempotent."""
        r = self._in_machine(name, ["tc", "qdisc", "del", "dev", DC_DEVICE,
                                    "root"], check=False)
        if r.returncode != 0:
            shown = self._in_machine(name, ["tc", "qdisc", "show", "dev",
                                            DC_DEVICE]).stdout
            if "netem" in shown or "tbf" in shown:
                raise CmdError(r.args, r.returncode, r.stdout, r.stderr,
                               where=f"sim machine {name}")

    # --- up and down -------------------------------------------------------

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()

    def up(self) -> "SimMachines":
        """Make the machines, their network and their sshd's keys; on any
        failure undo what was done and raise SimError (one line)."""
        if self._is_up:
            raise SimError(f"sim {self.name} is already up ({self._dir})")
        step = "checking what it needs"
        try:
            for tool in (SSHD, "ssh", "ssh-keygen", _PYTHON):
                if not shutil.which(tool):
                    raise SimError(f"{tool} not found: " + (
                        _INSTALL if "ssh" in tool else "`make deps`"))
            step = f"making {self._dir}"
            self._make_dir()
            step = "making its keys and sshd_config"
            self._keys()
            step = "starting the switch"
            self._start_switch()
            for n in self.names:
                step = f"starting machine {n}"
                self._start_machine(n)
            step = "wiring the data-centre network"
            self._wire()
            step = "writing ssh_config"
            self._write_ssh_config()
            for n in self.names:
                step = f"reaching machine {n} by ssh"
                self.run(n, ["true"])
        except BaseException as e:
            failed = self._undo_all()
            if not isinstance(e, Exception):
                raise
            more = f" (undoing it: {'; '.join(failed)})" if failed else ""
            # Our own errors say what failed; a command's needs the step.
            what = _one_line(e) if isinstance(e, DcblabError) and \
                not isinstance(e, CmdError) else f"{step}: {_one_line(e)}"
            raise SimError(f"sim {self.name}: {what}{more}") from e
        self._is_up = True
        return self

    def down(self) -> None:
        """Stop the machines and the switch, remove the sim's directory;
        idempotent, every step runs whatever the others did. SimError
        naming what failed, after all of them."""
        failed = self._undo_all()
        pids = proc.pids_with_tag(self.tag)
        if pids:
            proc.kill(pids)
        self._is_up = False
        if failed:
            raise SimError(f"sim {self.name}: down: {'; '.join(failed)}")

    def _do(self, what, undo):
        """Register UNDO (what it undoes: WHAT) right after doing it."""
        self._undo.append((what, undo))

    def _undo_all(self):
        failed = []
        while self._undo:
            what, undo = self._undo.pop()
            try:
                undo()
            except Exception as e:  # noqa: BLE001 - the others still run
                failed.append(f"{what}: {_one_line(e)}")
        return failed

    def _make_dir(self):
        path = str(self._dir)
        if any(c.isspace() or c in "%\"'\\" for c in path):
            raise UsageError(f"{path}: ssh and sshd configs cannot name a "
                             "path with spaces, quotes or %: set DCBLAB_RUN "
                             "to a plain path")
        run_root().mkdir(mode=0o755, parents=True, exist_ok=True)
        self._do("the run root", remove_run_root)
        try:
            self._dir.mkdir(mode=0o700)
        except FileExistsError:
            raise SimError(f"{self._dir} exists: sim {self.name} is up, or "
                           "died (`dcblab reap` removes a dead one's); or "
                           "pick another name") from None
        self._do(f"removing {self._dir}",
                 lambda: shutil.rmtree(self._dir))
        fd = os.open(self._dir / LOCK, os.O_RDWR | os.O_CREAT | os.O_EXCL,
                     0o600)
        self._lock_fd = fd
        self._do("the lock", self._close_lock)
        fcntl.flock(fd, fcntl.LOCK_EX)
        (self._dir / "mnt").mkdir(mode=0o700)

    def _close_lock(self):
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _keys(self):
        d = self._dir
        for key, comment in (("ssh_host_ed25519_key", "host"),
                             ("id_ed25519", "client")):
            run_cmd(["ssh-keygen", "-q", "-t", "ed25519", "-N", "",
                     "-C", f"dcblab-sim-{self.name}-{comment}",
                     "-f", str(d / key)])
        host = (d / "ssh_host_ed25519_key.pub").read_text().split()[:2]
        client = (d / "id_ed25519.pub").read_text().strip()
        (d / "authorized_keys").write_text(client + "\n")
        (d / "known_hosts").write_text(
            f"{','.join(self.names)} {' '.join(host)}\n")
        (d / "sshd_config").write_text(
            _SSHD_CONFIG.format(sim=self.name, dir=d))

    def _start(self, what, argv, log):
        holder = _Holder(what, argv, log, self._lock_fd)
        self._do(f"stopping {what}", holder.stop)
        holder.ready()
        netns = _ns_id(holder.pid, "net")
        pidns = _ns_id(holder.pid, "pid")
        if pidns == _ns_id("self", "pid"):
            pidns = None

        def stragglers():
            # Killed while the holder still holds the namespace (its
            # inode is not yet free for another to take).
            pids = _stragglers(netns, pidns, holder.popen.pid)
            if pids:
                proc.kill(pids)
        self._do(f"processes that entered {what}", stragglers)
        return holder

    def _start_switch(self):
        def forget():
            self._switch = None
        self._switch = self._start(
            "the switch", ["unshare", "--net", "--", "sh", "-c",
                           _SWITCH_SCRIPT, "dcblab-sim-switch", self.tag],
            self._dir / "switch.log")
        self._do("the switch's holder", forget)

    def _start_machine(self, name):
        stage = self._dir / "mnt" / name
        for sub in ("run", "sys"):
            (stage / sub).mkdir(mode=0o700, parents=True)
        holder = self._start(
            f"machine {name}",
            ["unshare", "--net", "--mount", "--uts", "--pid", "--fork",
             "--kill-child", "--propagation", "private", "--",
             "sh", "-c", _MACHINE_SCRIPT, "dcblab-sim-machine",
             os.path.realpath(self._dir), str(stage), name, self.tag,
             _PYTHON, _MACHINE_INIT],
            self._dir / f"{name}.log")
        self._holders[name] = holder
        self._do(f"machine {name}'s holder",
                 lambda: self._holders.pop(name, None))

    def _wire(self):
        # Only the switch's namespace and the machines' get devices: each
        # veth is made in the switch's with its peer put straight into the
        # machine's (netns PID), never in the host's root namespace.
        self._in_switch(["sysctl", "-q", "-w",
                         "net.ipv6.conf.all.disable_ipv6=1",
                         "net.ipv6.conf.default.disable_ipv6=1"])
        cmds = [f"link add {DC_BRIDGE} type bridge"]
        for n in self.names:
            cmds += [f"link add dc-{n} mtu {self.mtu} type veth peer name "
                     f"{DC_DEVICE} mtu {self.mtu} netns {self.pid(n)}",
                     f"link set dev dc-{n} master {DC_BRIDGE}",
                     f"link set dev dc-{n} up"]
        cmds.append(f"link set dev {DC_BRIDGE} up")
        self._in_switch(["ip", "-batch", "-"],
                        input="".join(c + "\n" for c in cmds))
        prefix = DC_NETWORK.prefixlen
        for n in self.names:
            self._in_machine(n, ["ip", "-batch", "-"], input=(
                f"addr add {self.address(n)}/{prefix} dev {DC_DEVICE}\n"
                f"link set dev {DC_DEVICE} up\n"))

    def _write_ssh_config(self):
        d = self._dir
        text = [f"# ssh to the machines of sim {self.name} (run "
                f"{self._run_id}), dcblab.lab.simmachines\n"]
        for n in self.names:
            proxy = shlex.join([
                "env", "--ignore-signal=HUP", "nsenter", "-t",
                str(self.pid(n)), "-n", "-m", "-p", "-u", "--",
                "env", "--default-signal=HUP", SSHD, "-i", "-e", "-f",
                str(d / "sshd_config")])
            text.append(_SSH_HOST.format(name=n, dir=d, proxy=proxy))
        self.ssh_config.write_text("\n".join(text))


def leftovers(sim: SimMachines) -> list[str]:
    """What of SIM is still there (empty after its down): processes with
    its run tag, its directory, mounts below it. (What runs in a machine
    dies with the machine's init: its PID namespace's.)"""
    left = []
    pids = proc.pids_with_tag(sim.tag)
    if pids:
        left.append(f"processes {sorted(pids)} carrying {sim.tag}")
    if sim.dir.exists():
        left.append(f"sim dir {sim.dir}")
    real = os.path.realpath(sim.dir)
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == real or point.startswith(real + "/"):
                left.append(f"mount on {point}")
    return left
