"""A host's baseline: the network config the topology gives each guest,
applied after boot and restored between tests."""

import json

__all__ = ["baseline_ip", "apply_baseline", "baseline_devices",
           "reset_baseline"]


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
        [n.vlan_dev(v) for n in host.nics for v in n.vlans]


def apply_baseline(machine, host):
    """All queue pairs of each multi-queue NIC on, then the ip config."""
    for nic in host.nics:
        if nic.queues > 1:
            machine.run(["ethtool", "-L", nic.name, "combined",
                         str(nic.queues)])
    machine.run(["ip", "-batch", "-"],
                input="\n".join(baseline_ip(host)) + "\n")


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


def reset_baseline(machine, host):
    """Back to the baseline, whatever was changed by hand: the per-test
    restore (guest-image/restore), then the baseline's devices and
    addresses made again if any is missing. Returns what it did."""
    res = machine.run(["dcblab-restore", *baseline_devices(host)],
                      check=False)
    done = res.stdout.splitlines()
    if res.rc != 0:
        done.append(f"dcblab-restore rc {res.rc}: {res.stderr.strip()}")
    missing = _missing(machine, host)
    if missing:
        for nic in host.nics:
            for vlan in nic.vlans:
                machine.run(["ip", "link", "del", nic.vlan_dev(vlan)],
                            check=False)
            machine.run(["ip", "addr", "flush", "dev", nic.name])
        apply_baseline(machine, host)
        done.append(f"baseline made again (missing: {', '.join(missing)})")
    return done
