"""Where a command runs: this machine, or another one reached by ssh.

A lab split across machines (docs/scale.md) does everything on another
machine through ssh and libvirt, with no daemon or RPC of dcblab's own:
``Ssh(machine, dest).run(argv)`` is ``ssh DEST -- 'ARGV'`` (argv quoted
for the remote shell, so an argument never splits), failing as
dcblab.core.cmd.run fails, with the machine's name in the error.
``Here()`` is the same interface on this machine.

ssh reads the user's own configuration (keys, ProxyJump); with
DCBLAB_SSH_CONFIG set it reads that file instead (the two-machine
simulation's, lab/simmachines.py). BatchMode: a machine that wants a
password is an error, not a prompt in the middle of ``dcblab up``.
"""

import os
import shlex
import subprocess

from .cmd import CmdError, run

__all__ = ["Here", "Ssh", "ssh_base", "SSH_CONFIG_ENV"]

SSH_CONFIG_ENV = "DCBLAB_SSH_CONFIG"


def ssh_base(config=None, tag=None):
    """ssh and the options every dcblab ssh uses; config: an ssh config
    file (default: DCBLAB_SSH_CONFIG's, else the user's own); tag: a
    lab's run tag, carried on the command line (as an environment
    variable sent, which a server that does not accept it ignores) so
    that the lab's teardown finds every ssh of the lab by it."""
    argv = ["ssh"]
    cfg = config or os.environ.get(SSH_CONFIG_ENV)
    if cfg:
        argv += ["-F", cfg]
    if tag:
        argv += ["-o", f"SetEnv=DCBLAB_RUN={tag}"]
    return argv + ["-o", "BatchMode=yes", "-o", "ServerAliveInterval=5",
                   "-o", "ServerAliveCountMax=3"]


class Here:
    """This machine."""

    name = ""
    remote = False

    def argv(self, argv):
        return list(argv)

    def run(self, argv, **kw):
        try:
            return run(self.argv(argv), **kw)
        except CmdError as e:
            raise CmdError(argv, e.rc, e.stdout, e.stderr,
                           where=self.where) from None

    @property
    def where(self):
        return "host"

    def popen(self, argv, **kw):
        return subprocess.Popen(self.argv(argv), **kw)

    def read(self, path):
        return self.run(["cat", str(path)]).stdout

    def write(self, path, text, mode="600"):
        """text into the file path (made, mode set, before it is
        written)."""
        self.run(["sh", "-c", 'umask 077 && cat > "$1" && chmod "$2" "$1"',
                  "sh", str(path), mode], input=text)


class Ssh(Here):
    """Another machine, through ssh."""

    remote = True

    def __init__(self, name, dest, config=None, tag=None):
        self.name = name
        self.dest = dest
        self.config = config or os.environ.get(SSH_CONFIG_ENV)
        self.tag = tag

    @property
    def where(self):
        return f"machine {self.name} ({self.dest})"

    def argv(self, argv):
        return [*ssh_base(self.config, self.tag), self.dest, "--",
                shlex.join(argv)]

    def forward(self, local, remote):
        """argv of an ssh that forwards the unix socket local (here) to
        remote (there) until killed."""
        return [*ssh_base(self.config, self.tag), "-N",
                "-o", "StreamLocalBindUnlink=yes",
                "-o", "ExitOnForwardFailure=yes",
                "-L", f"{local}:{remote}", self.dest]
