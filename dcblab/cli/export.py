"""dcblab export --libvirt: a topology as libvirt domain XML, for users who
run the lab's guests under their own libvirt."""

import shlex
from pathlib import Path

from ..backends import domain_xml
from ..core import paths
from ..core.errors import UsageError
from ..core.flavours import flavour
from ..lab import Wire, check_name, host_spec
from ..topology import load
from .common import say

__all__ = ["add_parsers"]

README = """\
# {name}: dcblab's lab as libvirt domains

Written by `dcblab export --libvirt {topology}`. One
domain per host ({hosts}); the same devices, kernel and command line as
`dcblab up --backend libvirt` uses.

1. The taps: each <interface type='ethernet'> names a tap that must exist
   (managed='no'; libvirt opens it, never creates it). wire.sh makes them
   and joins each link's two taps with tc mirred, as dcblab does in its
   private netns. Run it where your libvirtd runs (it adds taps to that
   network namespace; `ip netns add lab && ip netns exec lab sh wire.sh`
   keeps them out of the root namespace, then start libvirtd there).
2. `virsh create h1.xml` (transient) or `virsh define h1.xml && virsh
   start h1`. The serial console is a pty (`virsh console h1`), logged to
   HOST/console.log; the guest agent is on libvirt's channel
   (`virsh qemu-agent-command h1 '{{"execute":"guest-info"}}'`).
3. What dcblab does after boot is not in the XML: the baseline (addresses,
   the VLAN and its QoS maps, net_prio and net_cls mounts; see
   docs/lab.md). The guests boot with their links down.
"""


def _refuse_split(topo, given):
    """A lab split across machines has no one set of domains and wire to
    export: its cross-machine links are VXLAN devices made at `up`."""
    if topo.split:
        where = "; ".join(
            f"{', '.join(h.name for h in topo.hosts if h.machine == m)} "
            f"on {m}" for m in topo.machine_names if m)
        raise UsageError(f"dcblab export --libvirt: {given} runs guests on "
                         f"other machines ({where}): export writes one "
                         "machine's domains and wire; `dcblab up` runs a "
                         "split lab (docs/scale.md)")


def cmd_export(args):
    if not args.libvirt:
        raise UsageError("dcblab export: say what to export: --libvirt")
    topo = load(args.topology)
    _refuse_split(topo, args.topology)
    name = check_name(args.name or topo.name)
    out = Path(args.output)
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out}: not empty (export writes a fresh folder)")
    out.mkdir(parents=True, exist_ok=True)
    the_flavour = flavour(args.flavour)
    the_wire = Wire(topo, name, "export")
    written = []
    for host in topo.hosts:
        spec = host_spec(the_wire, host, the_flavour, args.accel)
        rundir = (out / host.name).resolve()
        rundir.mkdir(exist_ok=True)
        xml = out / f"{host.name}.xml"
        xml.write_text(domain_xml(spec, rundir))
        written.append(xml)
    wire = out / "wire.sh"
    wire.write_text("#!/bin/sh\n# The links of " + name + ": taps joined by "
                    "tc mirred (dcblab/lab/wire.py).\nset -e\n" +
                    "".join(shlex.join(c) + "\n"
                            for c in the_wire.link_commands()))
    wire.chmod(0o755)
    (out / "README").write_text(README.format(
        name=name, topology=args.topology,
        hosts=", ".join(h.name for h in topo.hosts)))
    missing = [p for p in (paths.boot_kernel(the_flavour.name),
                           paths.initramfs()) if not p.exists()]
    for p in written + [wire, out / "README"]:
        say(str(p))
    if missing:
        say(f"dcblab export: note: {', '.join(map(str, missing))} not built "
            "yet (`make kernel image`): the XML names them")
    return 0


def add_parsers(sub):
    p = sub.add_parser("export", help="a topology as libvirt domain XML "
                                      "(--libvirt), for your own libvirt")
    p.add_argument("topology", nargs="?",
                   default=str(paths.default_topology()),
                   help="topology file (default: topology/two-hosts.toml)")
    p.add_argument("--libvirt", action="store_true", required=True,
                   help="one domain XML per host, wire.sh for the taps, a "
                        "README")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="folder to write (new or empty)")
    p.add_argument("--name", help="lab name for MACs (default: the "
                                  "topology's name)")
    p.add_argument("--flavour", help="kernel flavour (default: lab)")
    p.add_argument("--accel", choices=("tcg", "kvm"), default="tcg",
                   help="domain type qemu (tcg, default) or kvm")
    p.set_defaults(func=cmd_export)
