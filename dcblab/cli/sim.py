"""`dcblab sim`: machines simulated on this one, for a lab across
machines without a second machine (docs/scale.md)."""

import os
import subprocess

from ..core.errors import UsageError
from ..core.remote import SSH_CONFIG_ENV
from ..lab import Lab, list_labs, read_state
from ..lab.simmachines import SimMachines
from .common import note, sigterm_as_exit

__all__ = ["add_parsers"]


def cmd_sim(args):
    names = tuple(n for n in args.machines.split(",") if n)
    if len(names) < 2:
        raise UsageError(f"sim --machines {args.machines!r}: give two or "
                         "more names, comma-separated")
    argv = args.argv or [os.environ.get("SHELL") or "/bin/sh"]
    sigterm_as_exit()
    with SimMachines(names, name=args.name, mtu=args.mtu) as sim:
        note(f"dcblab sim: machines {', '.join(names)} up (underlay dc0, "
             f"{', '.join(sim.address(n) for n in names)}, MTU {args.mtu});"
             f" {SSH_CONFIG_ENV}={sim.ssh_config}; running "
             f"{' '.join(argv)}; the machines go when it ends")
        env = dict(os.environ, **{SSH_CONFIG_ENV: str(sim.ssh_config)})
        try:
            rc = subprocess.run(argv, env=env).returncode
        except KeyboardInterrupt:
            rc = 130
        except FileNotFoundError as e:
            raise UsageError(f"sim: {argv[0]}: {e.strerror}") from None
        left = [n for n in list_labs()
                if read_state(n).get("ssh_config") == str(sim.ssh_config)]
        if left:
            note(f"dcblab sim: lab{'s' if len(left) > 1 else ''} "
                 f"{', '.join(left)} still on these machines: taking "
                 "them down first")
            for name in left:
                Lab.attach(name).down()
    return rc


def add_parsers(sub):
    p = sub.add_parser("sim", help="machines simulated on this one (a lab "
                                   "across machines without a second one): "
                                   "runs COMMAND with them, then removes "
                                   "them")
    p.add_argument("--machines", default="a,b",
                   help="their names, comma-separated (default a,b: what "
                        "topology/dcb-fabric-split.toml uses)")
    p.add_argument("--name", default="sim",
                   help="the simulation's name (its directory, "
                        "RUNROOT/sim-NAME; default sim)")
    p.add_argument("--mtu", type=int, default=9000,
                   help="the underlay's MTU (default 9000)")
    p.add_argument("argv", nargs="*", metavar="COMMAND",
                   help="what to run with the machines (after --; default "
                        "$SHELL), with DCBLAB_SSH_CONFIG set for it")
    p.set_defaults(func=cmd_sim)
