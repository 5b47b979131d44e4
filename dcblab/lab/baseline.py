"""A host's baseline: the network config the topology gives each guest,
applied after boot and restored between tests."""

__all__ = ["baseline_ip", "apply_baseline", "baseline_devices"]


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
