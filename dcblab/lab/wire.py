"""The lab's wire: a private network namespace holding the taps of each link.

Every host-side object of a lab lives in the namespace ``dcblab-<lab>``:
for each link, the two NICs' multi-queue taps, joined by a tc ``mirred``
redirect on each tap's ingress, so a frame leaving one guest is handed to
the other unchanged (802.1Q tag and PCP included, LLDP and other
link-local frames too, which a bridge would drop). The root namespace gets
nothing; the taps carry no address and IPv6 is off in the namespace, so
the host itself never puts a frame on the wire.

The namespace's ``lo`` carries the lab's run id as its alias
(``dcblab-run:<id>``): the reaper removes only namespaces that carry one.
"""

import hashlib
import json
import subprocess

from ..core.cmd import CmdError, run

__all__ = ["Wire", "RUN_ALIAS_PREFIX", "netns_name", "netns_run_id",
           "list_netns", "delete_netns"]

RUN_ALIAS_PREFIX = "dcblab-run:"


def netns_name(lab):
    return f"dcblab-{lab}"


def list_netns():
    out = run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def delete_netns(ns):
    """Remove a namespace (its taps go with it) if it exists."""
    if ns in list_netns():
        run(["ip", "netns", "del", ns], check=False)


def netns_run_id(ns):
    """The run id a dcblab namespace carries, or None."""
    r = run(["ip", "-n", ns, "-j", "link", "show", "lo"], check=False)
    try:
        alias = json.loads(r.stdout)[0].get("ifalias", "")
    except (ValueError, IndexError):
        return None
    if alias.startswith(RUN_ALIAS_PREFIX):
        return alias[len(RUN_ALIAS_PREFIX):]
    return None


class Wire:
    """Create and remove one lab's namespace and taps."""

    def __init__(self, topology, lab, run_id):
        self.topology = topology
        self.lab = lab
        self.run_id = run_id
        self.netns = netns_name(lab)

    @staticmethod
    def tap(nic):
        return f"{nic.host}-{nic.name}"

    def mac(self, nic):
        # Locally administered, unicast; distinct per lab name, host, NIC.
        h = hashlib.sha256(self.lab.encode()).digest()
        host = next(x for x in self.topology.hosts if x.name == nic.host)
        return (f"02:dc:{h[0]:02x}:{h[1]:02x}:"
                f"{host.index:02x}:{nic.index:02x}")

    def _ip(self, *args):
        return run(["ip", "-n", self.netns, *args])

    def up(self):
        if self.netns in list_netns():
            raise CmdError(["ip", "netns", "add", self.netns], 1, "",
                           f"network namespace {self.netns} already exists: "
                           f"`dcblab down --name {self.lab}` or `dcblab reap`")
        run(["ip", "netns", "add", self.netns])
        try:
            self._ip("link", "set", "lo", "alias",
                     f"{RUN_ALIAS_PREFIX}{self.run_id}")
            for key in ("all", "default"):
                run(["ip", "netns", "exec", self.netns, "sysctl", "-q", "-w",
                     f"net.ipv6.conf.{key}.disable_ipv6=1"])
            for argv in self.link_commands(("-n", self.netns)):
                run(argv)
        except BaseException:
            self.down()
            raise

    def link_commands(self, ns=()):
        """The ip and tc commands that make every link's taps and join
        them (``ns``: e.g. ("-n", NETNS)); also what `dcblab export
        --libvirt` writes to wire.sh."""
        cmds = []
        for link in self.topology.links:
            for nic in (link.a, link.b):
                mq = ["multi_queue"] if link.queues > 1 else []
                cmds.append(["ip", *ns, "tuntap", "add", "dev", self.tap(nic),
                             "mode", "tap", *mq])
                # A deep queue toward each guest: a burst from one guest
                # must wait for the other's vCPU, not be dropped.
                cmds.append(["ip", *ns, "link", "set", self.tap(nic),
                             "txqueuelen", "10000", "up"])
            for src, dst in ((link.a, link.b), (link.b, link.a)):
                cmds.append(["tc", *ns, "qdisc", "add", "dev", self.tap(src),
                             "ingress"])
                cmds.append(["tc", *ns, "filter", "add", "dev", self.tap(src),
                             "parent", "ffff:", "protocol", "all", "prio",
                             "1", "u32", "match", "u32", "0", "0", "action",
                             "mirred", "egress", "redirect", "dev",
                             self.tap(dst)])
        return cmds

    def down(self):
        """Remove the namespace; its taps go with it. Idempotent."""
        delete_netns(self.netns)

    def capture(self, nic, path, count, bpf=()):
        """tcpdump on NIC's tap (the host side of its link) to a pcap file.

        Returns the running Popen once tcpdump listens; it exits after
        ``count`` frames matching the BPF words ``bpf``.
        """
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, "tcpdump", "-i",
             self.tap(nic), "-w", str(path), "-U", "-n", "-s", "0",
             "-c", str(count), *bpf],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in proc.stderr:
            if "listening on" in line:
                return proc
        proc.wait()
        raise CmdError(proc.args, proc.returncode, "", "tcpdump exited "
                       "before listening")
