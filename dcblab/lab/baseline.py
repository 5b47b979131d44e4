"""A host's baseline: the network config the topology gives each guest,
applied after boot and restored between tests."""

import json

from ..guest.agent import AgentError
from .switch import (BRIDGE, pfcd_script, run_script, switch_qos_script,
                     switch_setup_script)

__all__ = ["baseline_ip", "apply_baseline", "baseline_devices",
           "baseline_rdma", "reset_baseline", "restore"]


def _qos(pairs):
    return [f"{a}:{b}" for a, b in pairs]


def baseline_ip(host):
    """`ip -batch` lines of a host's baseline network config."""
    lines = []
    for nic in host.nics:
        lines.append(f"link set {nic.name} up")
        if nic.ipv4:
            lines.append(f"addr add {nic.ipv4} dev {nic.name}")
        if nic.ipv6:
            lines.append(f"addr add {nic.ipv6} dev {nic.name} nodad")
        for vlan in nic.vlans:
            dev = nic.vlan_dev(vlan)
            lines.append(
                f"link add link {nic.name} name {dev} type vlan id {vlan.id} "
                f"egress-qos-map {' '.join(_qos(vlan.egress_qos_map))} "
                f"ingress-qos-map {' '.join(_qos(vlan.ingress_qos_map))}")
            lines.append(f"link set {dev} up")
            if vlan.ipv4:
                lines.append(f"addr add {vlan.ipv4} dev {dev}")
            if vlan.ipv6:
                lines.append(f"addr add {vlan.ipv6} dev {dev} nodad")
    return lines


def baseline_devices(host):
    """The network devices the baseline makes (what a restore keeps)."""
    return [n.name for n in host.nics] + \
        [n.vlan_dev(v) for n in host.nics for v in n.vlans] + \
        ([BRIDGE] if host.is_switch else [])


def baseline_rdma(host):
    """(rxe device, NIC) of each NIC that carries RoCE (topology key
    rdma): `rdma link add RXE type rxe netdev NIC` at boot, and kept by
    every restore."""
    return [(n.rdma_dev, n.name) for n in host.nics if n.rdma]


def apply_baseline(machine, host, rdma=True):
    """All queue pairs of each multi-queue NIC on, then the ip config and
    (rdma) the NICs' rxe devices; a switch's whole setup
    (dcblab.lab.switch)."""
    if host.is_switch:
        run_script(machine, switch_setup_script(host))
        return
    for nic in host.nics:
        if nic.queues > 1:
            machine.run(["ethtool", "-L", nic.name, "combined",
                         str(nic.queues)])
        if nic.speed:
            machine.run(["ethtool", "-s", nic.name, "speed",
                         str(nic.speed), "duplex", "full"])
    machine.run(["ip", "-batch", "-"],
                input="\n".join(baseline_ip(host)) + "\n")
    # After the addresses: rxe takes its GIDs (RoCEv2's IP addresses) from
    # the NIC and its VLANs as they appear.
    for rxe, dev in baseline_rdma(host) if rdma else ():
        machine.run(["rdma", "link", "add", rxe, "type", "rxe", "netdev",
                     dev])


def _missing(machine, host):
    """What of the baseline's devices and addresses a guest lacks."""
    have = {d["ifname"]: {f"{a['local']}/{a['prefixlen']}"
                          for a in d.get("addr_info", [])}
            for d in json.loads(machine.run(["ip", "-j", "addr"]).stdout)}
    missing = []
    for nic in host.nics:
        devs = [(nic.name, nic.ipv4, nic.ipv6)] + \
            [(nic.vlan_dev(v), v.ipv4, v.ipv6) for v in nic.vlans]
        for dev, *addrs in devs:
            if dev not in have:
                missing.append(dev)
            missing += [f"{a} on {dev}" for a in map(str, filter(None, addrs))
                        if a not in have.get(dev, ())]
    return missing


def restore(machine, host, dcbx=False, check=True):
    """The per-test restore (guest-image/restore) of one guest. With
    dcbx, a host NIC facing a switch keeps its DCB: lldpad adopted it
    from the switch, and would not write it again before its next
    LLDPDU exchange (30 s). A switch keeps its ports' DCB and gets its
    trust filters and qdiscs back (the restore removes them; fresh
    counters, too): resetting a port's DCB under a running lldpad made
    it withdraw the APP entries from its peer, which did not get them
    back for tens of seconds (seen: h3 without 4791:3 16 s after).
    A test that changes a switch port's DCB puts it back itself."""
    keep = [n.name for n in host.nics
            if host.is_switch or (dcbx and n.peer_is_switch)]
    env = [f"DCBLAB_KEEP_DCB={' '.join(keep)}"] if keep else []
    rdma = " ".join(f"{rxe}:{dev}" for rxe, dev in baseline_rdma(host))
    env += [f"DCBLAB_RDMA={rdma}"] if rdma else []
    env = ["env", *env] if env else []
    res = machine.run([*env, "dcblab-restore", *baseline_devices(host)],
                      check=check)
    fixed, gone = _vlan_qos(machine, host)
    fixed += _speeds(machine, host)
    # A VLAN device moved into a namespace goes with it when the restore
    # deletes the namespace (a VLAN device is not given back to init_net):
    # the baseline is made again, as `dcblab reset` would.
    if gone:
        missing = _missing(machine, host)
        _make_again(machine, host)
        fixed.append(f"baseline made again (missing: {', '.join(missing)})")
    if fixed:
        res.stdout += "".join(f"restore: {line}\n" for line in fixed)
    if host.is_switch:
        run_script(machine, "\n".join(switch_qos_script(host, dcb=False)
                                      + pfcd_script(host, if_stopped=True)),
                   "switch restore")
    return res


def _speeds(machine, host):
    """Each NIC's link speed back to the topology's, if a test changed
    it (read from sysfs through the agent: no process unless it
    differs)."""
    fixed = []
    for nic in host.nics:
        if not nic.speed:
            continue
        try:
            now = machine.agent.read_file(
                f"/sys/class/net/{nic.name}/speed").decode().strip()
        except AgentError:
            continue
        if now != str(nic.speed):
            machine.run(["ethtool", "-s", nic.name, "speed", str(nic.speed),
                         "duplex", "full"])
            fixed.append(f"{nic.name}: link speed back to {nic.speed} "
                         "Mbit/s")
    return fixed


def _qos_tokens(text, word):
    """The p:q pairs of /proc/net/vlan/DEV's "WORD priority mappings:"
    line."""
    for line in text.splitlines():
        if line.strip().startswith(f"{word} priority mappings:"):
            return line.split(":", 1)[1].split()
    return []


def _vlan_qos(machine, host):
    """The VLAN devices' QoS maps back to the topology's, if a test or a
    lab changed them (guest-image/restore does not know the topology's
    maps). Read from /proc/net/vlan through the agent (no process); one
    `ip` run only for a device whose map differs. Egress pairs the
    baseline does not have are set to PCP 0: the kernel keeps an egress
    entry once made, so those read back as p:0."""
    fixed, gone = [], []
    for nic in host.nics:
        for vlan in nic.vlans:
            dev = nic.vlan_dev(vlan)
            try:
                text = machine.agent.read_file(
                    f"/proc/net/vlan/{dev}").decode()
            except AgentError:   # gone: the caller makes it again
                gone.append(dev)
                continue
            egress = set(_qos(vlan.egress_qos_map))
            ingress = _qos(vlan.ingress_qos_map)
            known = {p.split(":")[0] for p in egress}
            extra = [t for t in _qos_tokens(text, "EGRESS")
                     if t not in egress and t.split(":")[0] not in known]
            now_in = set(_qos_tokens(text, "INGRESS"))
            if not [t for t in extra if not t.endswith(":0")] and \
                    egress <= set(_qos_tokens(text, "EGRESS")) and \
                    set(ingress) <= now_in:
                continue
            zero = [f"{t.split(':')[0]}:0" for t in extra]
            machine.run(["ip", "link", "set", "dev", dev, "type", "vlan",
                         "egress-qos-map", *sorted(egress), *zero,
                         "ingress-qos-map", *ingress])
            fixed.append(f"vlan {dev}: egress-qos-map and ingress-qos-map "
                         "back to the topology's")
    return fixed, gone


def reset_baseline(machine, host, dcbx=False):
    """Back to the baseline, whatever was changed by hand: the per-test
    restore (guest-image/restore), then the baseline's devices and
    addresses made again if any is missing. Returns what it did."""
    res = restore(machine, host, dcbx, check=False)
    done = res.stdout.splitlines()
    if res.rc != 0:
        done.append(f"dcblab-restore rc {res.rc}: {res.stderr.strip()}")
    missing = _missing(machine, host)
    if missing:
        _make_again(machine, host)
        done.append(f"baseline made again (missing: {', '.join(missing)})")
    return done


def _make_again(machine, host):
    """The baseline's devices and addresses made anew: its VLAN devices
    deleted, its NICs' addresses flushed, the baseline applied (a
    restore, run before, has made any missing rxe device again)."""
    for nic in host.nics:
        for vlan in nic.vlans:
            machine.run(["ip", "link", "del", nic.vlan_dev(vlan)],
                        check=False)
        machine.run(["ip", "addr", "flush", "dev", nic.name])
    apply_baseline(machine, host, rdma=False)
