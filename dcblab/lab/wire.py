"""The lab's wire: a private network namespace holding the taps of each link.

Every host-side object of a lab lives in its own network namespace: for
each link, the two NICs' multi-queue taps, joined by a tc ``mirred``
redirect on each tap's ingress, so a frame leaving one guest is handed to
the other unchanged (802.1Q tag and PCP included, LLDP and other
link-local frames too, which a bridge would drop). The root namespace gets
nothing; the taps carry no address and IPv6 is off in the namespace, so
the host itself never puts a frame on the wire.

The namespace has no name in /run/netns: it is bound on the file
``netns`` in the lab's run directory (``unshare --net=FILE``), commands
run in it through ``nsenter --net=FILE``, and ``down`` unmounts and
removes that file with the rest of the run directory. ``ip netns add``
would create /run/netns and make it a shared mount on a machine that
never had one, and both would stay after the lab.

The namespace's ``lo`` carries the lab's run id as its alias
(``dcblab-run:<id>``), for anyone who finds it: `dcblab status` names the
file, and ``nsenter --net=/run/dcblab/LAB/netns ip link`` shows it.
"""

import hashlib
import itertools
import json
import os
import subprocess
from pathlib import Path

from ..core.cmd import CmdError, run
from ..core.ns import in_netns, is_mountpoint, umount
from .runs import lab_dir

__all__ = ["Wire", "RUN_ALIAS_PREFIX", "NETNS_FILE", "netns_path",
           "netns_exists", "delete_netns", "named_netns", "delete_named_netns",
           "listening"]

RUN_ALIAS_PREFIX = "dcblab-run:"
NETNS_FILE = "netns"
# Where `ip netns` keeps named namespaces: dcblab before this version
# named its labs' namespaces there (dcblab-LAB); the reaper still removes
# such leftovers.
NAMED_NETNS_DIR = Path("/run/netns")


def netns_path(lab):
    """The file a lab's network namespace is bound on."""
    return lab_dir(lab) / NETNS_FILE


def netns_exists(netns):
    return bool(netns) and is_mountpoint(netns)


def delete_netns(netns):
    """Unbind a lab's namespace and remove its file; the namespace (and
    its taps) goes when the last process in it exits. Idempotent."""
    if netns_exists(netns):
        umount(netns)
    try:
        os.unlink(netns)
    except FileNotFoundError:
        pass


def named_netns():
    """Names of dcblab namespaces in /run/netns (left by older versions);
    reads the directory only, so it creates nothing."""
    try:
        return sorted(n for n in os.listdir(NAMED_NETNS_DIR)
                      if n.startswith("dcblab-"))
    except FileNotFoundError:
        return []


def netns_run_id(netns):
    """The run id a dcblab namespace (a file) carries, or None."""
    r = run(in_netns(netns, ["ip", "-j", "link", "show", "lo"]),
            check=False)
    try:
        alias = json.loads(r.stdout)[0].get("ifalias", "")
    except (ValueError, IndexError):
        return None
    if alias.startswith(RUN_ALIAS_PREFIX):
        return alias[len(RUN_ALIAS_PREFIX):]
    return None


def delete_named_netns(name):
    run(["ip", "netns", "del", name], check=False)


class Wire:
    """Create and remove one lab's namespace and taps."""

    def __init__(self, topology, lab, run_id, mac_seed=None):
        self.topology = topology
        self.lab = lab
        self.run_id = run_id
        self.netns = str(netns_path(lab))
        # The name the MACs are made from: the lab's, or for a lab
        # restored from a snapshot the lab's that saved it (a guest keeps
        # the MACs it was saved with).
        self.mac_seed = mac_seed or lab

    @staticmethod
    def tap(nic):
        return f"{nic.host}-{nic.name}"

    def mac(self, nic):
        # Locally administered, unicast; distinct per lab name (the
        # seed's), host, NIC.
        h = hashlib.sha256(self.mac_seed.encode()).digest()
        host = next(x for x in self.topology.hosts if x.name == nic.host)
        return (f"02:dc:{h[0]:02x}:{h[1]:02x}:"
                f"{host.index:02x}:{nic.index:02x}")

    def argv(self, argv):
        """ARGV as run inside the lab's namespace."""
        return in_netns(self.netns, argv)

    def run(self, argv, **kw):
        """Run ARGV inside the lab's namespace (dcblab.core.cmd.run)."""
        return run(self.argv(argv), **kw)

    def up(self):
        if netns_exists(self.netns):
            raise CmdError(["unshare", f"--net={self.netns}"], 1, "",
                           f"network namespace {self.netns} already exists: "
                           f"`dcblab down --name {self.lab}` or `dcblab reap`")
        Path(self.netns).touch(mode=0o600)
        try:
            run(["unshare", f"--net={self.netns}", "true"])
            self.configure()
        except BaseException:
            self.down()
            raise

    def configure(self):
        """The new namespace: IPv6 off, lo carrying the run id, then
        link_commands(). One process per run of one tool's commands, not
        one per command: ip and tc each read them from stdin (three runs:
        ip makes the taps, tc their qdiscs and filters, ip sets them
        up)."""
        cmds = [["ip", "link", "set", "lo", "alias",
                 f"{RUN_ALIAS_PREFIX}{self.run_id}"],
                *self.link_commands()]
        self.run(["sysctl", "-q", "-w",
                  "net.ipv6.conf.all.disable_ipv6=1",
                  "net.ipv6.conf.default.disable_ipv6=1"])
        for tool, batch in itertools.groupby(cmds, lambda c: c[0]):
            self.run([tool, "-batch", "-"],
                     input="".join(" ".join(c[1:]) + "\n" for c in batch))

    def link_commands(self):
        """The ip and tc commands that make every link's taps and join
        them, in the order they run; also what `dcblab export --libvirt`
        writes to wire.sh."""
        taps = [self.tap(nic) for link in self.topology.links
                for nic in (link.a, link.b)]
        cmds = []
        for link in self.topology.links:
            for nic in (link.a, link.b):
                cmds += self.tap_commands(link, nic)
        for link in self.topology.links:
            for src, dst in ((link.a, link.b), (link.b, link.a)):
                cmds += self.join_commands(self.tap(src), self.tap(dst))
        cmds += [["ip", "link", "set", "dev", t, "up"] for t in taps]
        return cmds

    @classmethod
    def tap_commands(cls, link, nic):
        """The commands that make NIC's tap for LINK."""
        mq = ["multi_queue"] if link.queues > 1 else []
        # A deep queue toward each guest (tun's ring per queue is
        # txqueuelen long): a burst from one guest must wait for the
        # other's vCPU, not be dropped.
        return [["ip", "tuntap", "add", "dev", cls.tap(nic), "mode", "tap",
                 *mq],
                ["ip", "link", "set", "dev", cls.tap(nic), "txqueuelen",
                 "10000"]]

    @staticmethod
    def join_commands(src, dst):
        """The commands that hand every frame arriving on device src to
        device dst, unchanged (tc mirred on src's ingress)."""
        # No qdisc toward the guest: tun never stops a queue (a full ring
        # drops), so a qdisc there only passed frames through, and the
        # default one (mq, a pfifo_fast of three txqueuelen rings under
        # each of tun's 256 possible queues: ~60 MB) took up to 0.25 s
        # per tap to set up.
        return [["tc", "qdisc", "add", "dev", src, "root", "noqueue"],
                ["tc", "qdisc", "add", "dev", src, "ingress"],
                ["tc", "filter", "add", "dev", src, "parent", "ffff:",
                 "protocol", "all", "prio", "1", "u32", "match", "u32", "0",
                 "0", "action", "mirred", "egress", "redirect", "dev", dst]]

    def down(self):
        """Remove the namespace; its taps go with it once the guests are
        gone. Idempotent."""
        delete_netns(self.netns)

    def capture(self, nic, path, count, bpf=()):
        """tcpdump on NIC's tap (the host side of its link) to a pcap file.

        Returns the running Popen once tcpdump listens; it exits after
        ``count`` frames matching the BPF words ``bpf``.
        """
        return listening(subprocess.Popen(
            self.argv(["tcpdump", "-i", self.tap(nic), "-w", str(path),
                       "-U", "-n", "-s", "0", "-c", str(count), *bpf]),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))


def listening(proc):
    """A tcpdump Popen (stderr piped, text) once it says it listens."""
    for line in proc.stderr:
        if "listening on" in line:
            return proc
    proc.wait()
    raise CmdError(proc.args, proc.returncode, "", "tcpdump exited "
                   "before listening")
