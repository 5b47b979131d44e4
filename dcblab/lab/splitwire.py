"""The wire of a lab split across machines (docs/scale.md).

Each machine holding hosts of the lab gets the lab's wire as on one
machine (wire.py): its own network namespace, bound on the file
RUNDIR/netns at the same path there, holding the taps of its hosts' NICs,
the two taps of a link between two of its hosts joined by tc mirred. A
link whose ends are on two machines (a cross-machine link) has its tap on
each machine joined, by the same mirred filters, to a VXLAN device in
that machine's lab namespace: a frame leaves the guest, crosses the tap
and the VXLAN device unchanged (802.1Q tag and PCP, LLDP and PFC frames:
no bridge anywhere), is carried in UDP over the machines' underlay, and
enters the other guest through the far tap. A netem or a shaper on a tap
acts before encapsulation, so a fault behaves the same on a local and a
cross-machine link.

The VXLAN device is made in the machine's own namespace, where the
underlay is, and then moved into the lab's: its UDP socket stays where
it was made (VXLAN across namespaces), and only the device sits in the
lab's. While it is in the machine's namespace it is named
``dx<run id>-<n>``, so a lab that dies between the two steps leaves
nothing the reaper cannot find. An nftables table ``dcblab_<run id>`` in
the machine's namespace drops VXLAN packets of the lab's VNIs from any
address but the lab's machines' underlay addresses: the lab's links are
reachable only from its machines.

Everything runs through ssh (core/remote.py): no agent of dcblab's own on
the machines. ``SplitWire`` is the lab's wire as the scenarios use it:
``run(["ip", ..., "dev", TAP])`` runs on the machine holding TAP, and
``run(["ip", "-j", ...])`` without a device on every machine, its JSON
lists joined.
"""

import hashlib
import json

from ..core.cmd import CmdError
from ..core.ns import in_netns
from ..core.remote import Here, Ssh
from .runs import LabError, lab_dir, run_tag
from .wire import Wire, listening

__all__ = ["MachineWire", "SplitWire", "shells", "vnis", "VXLAN_OVERHEAD",
           "GUEST_MTU", "VLAN_TAG", "check_underlays", "remote_teardown"]

GUEST_MTU = 1500
VLAN_TAG = 4
# Outer IPv4 20 + UDP 8 + VXLAN 8 + the inner Ethernet header 14.
VXLAN_OVERHEAD = 50


def shells(topology, ssh_config=None, run_id=None):
    """{machine name: Here() or Ssh(...)} of the machines holding hosts;
    with run_id, each ssh carries the run's tag."""
    out = {}
    tag = run_tag(run_id) if run_id else None
    for name in topology.machine_names:
        if name:
            m = topology.machine(name)
            out[name] = Ssh(name, m.ssh, ssh_config, tag)
        else:
            out[name] = Here()
    return out


def vnis(topology, lab):
    """{link name: VNI} of the cross-machine links: the file's ``vni``,
    else one made from the lab's name and the link's (two labs on the
    same machines share the UDP port, never a VNI)."""
    out, used = {}, {link.vni for link in topology.cross_links if link.vni}
    for link in topology.cross_links:
        if link.vni:
            out[link.name] = link.vni
            continue
        h = hashlib.sha256(f"{lab}/{link.name}".encode()).digest()
        vni = int.from_bytes(h[:3], "big") % 0xfffffe + 1
        while vni in used:
            vni = vni % 0xfffffe + 1
        used.add(vni)
        out[link.name] = vni
    return out


def check_underlays(topology, shells_):
    """Refuse (one line) an underlay whose MTU cannot carry a guest's
    tagged frame in VXLAN, or that is missing."""
    need = GUEST_MTU + VLAN_TAG + VXLAN_OVERHEAD
    for name in {e for link in topology.cross_links
                 for e in (topology.machine_of(link.a.host),
                           topology.machine_of(link.b.host))}:
        m = topology.machine(name)
        r = shells_[name].run(["ip", "-j", "link", "show", "dev",
                               m.underlay], check=False)
        if r.returncode != 0:
            raise LabError(f"machine {name}: underlay {m.underlay}: "
                           f"{(r.stderr or r.stdout).strip() or 'not found'}"
                           f" ({topology.path}: machines.{name}.underlay)")
        mtu = json.loads(r.stdout)[0]["mtu"]
        if mtu < need:
            raise LabError(
                f"machine {name}: underlay {m.underlay} has MTU {mtu}, a "
                f"cross-machine link needs {need} (guest MTU {GUEST_MTU} + "
                f"{VLAN_TAG} VLAN tag + {VXLAN_OVERHEAD} VXLAN over IPv4): "
                f"raise it (`ip link set dev {m.underlay} mtu {need}`)")


class MachineWire(Wire):
    """One machine's part of a split lab's wire."""

    def __init__(self, topology, lab, run_id, machine, shell, mac_seed=None,
                 vni=None):
        super().__init__(topology, lab, run_id, mac_seed)
        self.machine = machine
        self.shell = shell
        self.vni = vni if vni is not None else vnis(topology, lab)
        self.dir = lab_dir(lab)

    def _here(self, host):
        return self.topology.machine_of(host) == self.machine

    def local_links(self):
        return [link for link in self.topology.links
                if self._here(link.a.host) and self._here(link.b.host)]

    def cross(self):
        """(link, this machine's end, the other end's machine) of each
        cross-machine link with an end here."""
        out = []
        for link in self.topology.cross_links:
            for mine, other in ((link.a, link.b), (link.b, link.a)):
                if self._here(mine.host):
                    out.append((link, mine,
                                self.topology.machine_of(other.host)))
        return out

    @staticmethod
    def vxlan(link):
        return f"vx-{link.name}"[:15]

    def taps(self):
        return [self.tap(n) for link in self.local_links()
                for n in (link.a, link.b)] + \
               [self.tap(mine) for _, mine, _ in self.cross()]

    def argv(self, argv):
        return self.shell.argv(in_netns(self.netns, argv))

    def run(self, argv, **kw):
        return self.shell.run(in_netns(self.netns, argv), **kw)

    def exists(self):
        return self.shell.run(["mountpoint", "-q", self.netns],
                              check=False).returncode == 0

    def up(self):
        if self.exists():
            raise LabError(f"machine {self.machine or 'here'}: network "
                           f"namespace {self.netns} already exists: "
                           f"`dcblab down --name {self.lab}` or `dcblab "
                           "reap`")
        try:
            self.shell.run(["mkdir", "-p", "-m", "700", str(self.dir)])
            self.shell.run(["touch", self.netns])
            self.shell.run(["unshare", f"--net={self.netns}", "true"])
            self._vxlans()
            self.configure()
            self._firewall()
        except BaseException:
            self.down()
            raise

    def _tmp(self, i):
        return f"dx{self.run_id[:8]}-{i}"

    def _vxlans(self):
        """Each cross-machine link's VXLAN device: made in the machine's
        namespace (its socket stays there), moved into the lab's."""
        for i, (link, _, other) in enumerate(self.cross()):
            me = self.topology.machine(self.machine)
            peer = self.topology.machine(other)
            tmp = self._tmp(i)
            self.shell.run(["ip", "link", "add", tmp, "type", "vxlan", "id",
                            str(self.vni[link.name]), "local",
                            str(me.address), "remote", str(peer.address),
                            "dstport", str(self.topology.vxlan_port), "dev",
                            me.underlay, "nolearning"])
            self.shell.run(["ip", "link", "set", tmp, "netns", self.netns])
            self.run(["ip", "link", "set", tmp, "name", self.vxlan(link)])

    def link_commands(self):
        cmds = []
        ends = [(self.tap(n), self.tap(p)) for link in self.local_links()
                for n, p in ((link.a, link.b), (link.b, link.a))]
        ends += [(self.tap(mine), self.vxlan(link))
                 for link, mine, _ in self.cross()]
        ends += [(self.vxlan(link), self.tap(mine))
                 for link, mine, _ in self.cross()]
        for link in self.local_links():
            for nic in (link.a, link.b):
                cmds += self.tap_commands(link, nic)
        for link, mine, _ in self.cross():
            cmds += self.tap_commands(link, mine)
        for src, dst in ends:
            cmds += self.join_commands(src, dst)
        # A tagged full-size frame is 4 bytes over the default 1500.
        cmds += [["ip", "link", "set", "dev", self.vxlan(link), "mtu",
                  str(GUEST_MTU + VLAN_TAG)] for link, _, _ in self.cross()]
        cmds += [["ip", "link", "set", "dev", d, "up"]
                 for d in self.taps() + [self.vxlan(link)
                                         for link, _, _ in self.cross()]]
        return cmds

    def table(self):
        return f"dcblab_{self.run_id}"

    def _firewall(self):
        """VXLAN packets of the lab's VNIs only from its machines."""
        cross = self.cross()
        if not cross:
            return
        peers = sorted({str(self.topology.machine(o).address)
                        for _, _, o in cross})
        ids = sorted({self.vni[link.name] for link, _, _ in cross})
        rule = (f"udp dport {self.topology.vxlan_port} @th,96,24 "
                f"{{ {', '.join(map(str, ids))} }} ip saddr != "
                f"{{ {', '.join(peers)} }} counter drop")
        self.shell.run(["nft", "-f", "-"], input=(
            f"table inet {self.table()} {{\n"
            f"  chain vxlan {{\n"
            f"    type filter hook input priority filter - 1;\n"
            f"    {rule}\n  }}\n}}\n"))

    def down(self):
        """Remove this machine's part: the namespace (its taps and VXLAN
        devices go with it), a VXLAN device left in the machine's
        namespace, the firewall table, the run directory. Idempotent."""
        errors = []
        for argv in (
                ["sh", "-c", 'for d in $(ip -o link show | cut -d: -f2 | '
                 'cut -d@ -f1); do case $d in "$1"*) ip link del "$d";; '
                 'esac; done', "sh", f"dx{self.run_id[:8]}-"],
                ["sh", "-c", 'nft list table inet "$1" >/dev/null 2>&1 || '
                 'exit 0; nft delete table inet "$1"', "sh", self.table()],
                # The run root goes with its last lab, as here.
                ["sh", "-c", 'if mountpoint -q "$1"; then umount -n -l "$1";'
                 ' fi; rm -rf "$2"; rmdir "${2%/*}" 2>/dev/null; true', "sh",
                 self.netns, str(self.dir)]):
            try:
                self.shell.run(argv)
            except CmdError as e:
                errors.append(str(e).splitlines()[0])
        if errors:
            raise LabError(f"machine {self.machine}: teardown: "
                           f"{'; '.join(errors)}")

    def capture(self, nic, path, count, bpf=()):
        """tcpdump on NIC's tap on its machine, the pcap written here."""
        import subprocess  # only capture needs it
        out = open(path, "wb")
        try:
            proc = subprocess.Popen(
                self.argv(["tcpdump", "-i", self.tap(nic), "-w", "-", "-U",
                           "-n", "-s", "0", "-c", str(count), *bpf]),
                stdout=out, stderr=subprocess.PIPE, text=True)
        finally:
            out.close()
        return listening(proc)


class SplitWire:
    """A split lab's wire as its users see it: one MachineWire per
    machine, commands routed to the machine holding their device."""

    def __init__(self, topology, lab, run_id, mac_seed=None,
                 ssh_config=None):
        self.topology = topology
        self.lab = lab
        self.run_id = run_id
        vni = vnis(topology, lab)
        self.parts = {m: MachineWire(topology, lab, run_id, m, s, mac_seed,
                                     vni)
                      for m, s in shells(topology, ssh_config,
                                         run_id).items()}
        self.netns = next(iter(self.parts.values())).netns
        self.mac_seed = mac_seed or lab

    tap = staticmethod(Wire.tap)

    def mac(self, nic):
        return next(iter(self.parts.values())).mac(nic)

    def part(self, host):
        return self.parts[self.topology.machine_of(host)]

    def of_device(self, dev):
        for part in self.parts.values():
            if dev in part.taps() or dev in [part.vxlan(link) for link, _, _
                                             in part.cross()]:
                return part
        raise LabError(f"lab {self.lab}: no device {dev} on any machine")

    def run(self, argv, **kw):
        if "dev" in argv:
            return self.of_device(argv[argv.index("dev") + 1]).run(argv,
                                                                   **kw)
        if "-j" not in argv:
            raise LabError(f"lab {self.lab}: {' '.join(argv)}: on a split "
                           "lab name the device (or ask for JSON)")
        outs = [p.run(argv, **kw) for p in self.parts.values()]
        merged = [x for o in outs for x in json.loads(o.stdout or "[]")]
        outs[0].stdout = json.dumps(merged)
        return outs[0]

    def capture(self, nic, path, count, bpf=()):
        return self.part(nic.host).capture(nic, path, count, bpf)


def remote_teardown(topology, lab, run_id, say=lambda msg: None,
                    ssh_config=None):
    """Every machine's part of run_id, through ssh: its processes (the
    run id is on their command lines: libvirtd, the QEMUs), the console
    copies' tails, then the wire (MachineWire.down). Every machine is
    tried whatever another did; the errors, one line each, at the end."""
    errors = []
    for name, shell in shells(topology, ssh_config).items():
        if not shell.remote:
            continue
        part = MachineWire(topology, lab, run_id, name, shell)
        try:
            # Patterns with [.] and [+]: the shell running pkill has
            # them on its own command line, and must not match.
            shell.run(["sh", "-c", 'pkill -KILL -f -- "$1"; pkill -KILL -f '
                       '-- "tail -n [+]1 -F $2/"; true', "sh",
                       f"dcblab[.]run={run_id}", str(part.dir)])
            part.down()
            say(f"machine {name}: run {run_id} torn down")
        except CmdError as e:
            why = (e.stderr or "").strip().splitlines()
            errors.append(f"machine {name} ({shell.dest}): "
                          f"{why[-1] if why else f'exit {e.rc}'}: its part "
                          "is left there")
        except LabError as e:
            errors.append(str(e).splitlines()[0])
    if errors:
        raise LabError("; ".join(errors))
