"""A switch machine: its ports in a VLAN-aware bridge, PCP trusted on
ingress, each port's DCB configuration applied to the port's driver (so
that lldpad advertises it) and enforced by qdiscs (ETS under the port's
shaper). docs/fabric.md explains the data path.

Everything is one shell script per step, run by the guest's sh in one
agent command: each `ip`/`tc`/`dcb` run costs ~70 ms under TCG, most of
it the dynamic loader, and an agent round trip adds its own.
"""

from .runs import LabError

__all__ = ["switch_setup_script", "switch_qos_script", "ets_qdisc_args",
           "port_qdiscs", "port_bands", "dcb_batch", "run_script",
           "tbf_burst", "BRIDGE", "ETS_HANDLE", "pfc_thresholds",
           "pfc_bands", "pfcd_args", "pfcd_script", "PFCD", "PFC_LINK_BPS",
           "PFC_REACTION_S", "enforced_script", "fifo_handle",
           "trust_filters"]

BRIDGE = "br0"
# Full paths: busybox sh runs its own ip/tc applets before PATH.
IP, TC, DCB, BR, ETHTOOL = ("/sbin/ip", "/sbin/tc", "/sbin/dcb",
                            "/sbin/bridge", "/sbin/ethtool")
# The handle of the ETS qdisc on a port (under the shaper's 1: when the
# port has a rate): `tc -s class show dev swp3 parent 10:` lists its bands.
ETS_HANDLE = "10:"
# Ingress filters that trust the PCP: one per PCP, handle PCP + 1.
TRUST_PREF = 10
# A port that trusts DSCP: before them, one filter per APP DSCP entry of
# the port, for IPv4 and IPv6, untagged and tagged (one pref each: a tc
# filter priority holds one protocol), handle DSCP + 1.
_DSCP_PREFS = ((6, "ip", ""), (7, "ipv6", ""), (8, "802.1Q", "ipv4"),
               (9, "802.1Q", "ipv6"))
# The switch's DCB agent (tools/pfcd.c: PFC, and each port's ets qdisc
# following the port's DCB state) behind its start/stop script.
PFCD = "/sbin/dcblab-pfcd"
# The link speed virtio_net times pauses at when the device reports none
# (kernel-patches/0005): what drains a port without a rate.
PFC_LINK_BPS = 1_000_000_000
# What a band must hold above XOFF, as time at the port's link speed: on
# the lab (TCG, two cores, four guests) the largest backlog above XOFF was
# 2.74 MB, 219 ms of a 100 Mbit/s link (docs/pfc.md, "Headroom").
PFC_REACTION_S = 0.4
# Full-size tagged frame on the wire (no FCS): the unit of the minimums.
_FRAME = 1522


def port_bands(dcb):
    """The ETS qdisc's bands for a port's DCB, in the qdisc's order: the
    strict TCs first, highest TC first (802.1Q: among strict classes the
    higher TC wins; `ets` serves band 0 first), then the ETS TCs in TC
    order. A list of TC numbers; band i serves TC bands[i]."""
    used = range(dcb.tcs)
    strict = [tc for tc in reversed(used) if dcb.tsa[tc] == "strict"]
    ets = [tc for tc in used if dcb.tsa[tc] == "ets"]
    return strict + ets


def ets_qdisc_args(dcb):
    """`tc qdisc add ... ets` arguments enforcing dcb: bands, strict
    count, quanta proportional to the bandwidth shares (DRR: each round a
    band may send its quantum, so the shares of backlogged bands are the
    quanta's ratio), priomap priority -> band of its TC."""
    bands = port_bands(dcb)
    strict = sum(1 for tc in bands if dcb.tsa[tc] == "strict")
    # 100 bytes per percent: 20 % -> 2000 bytes, at least one full frame
    # for any share >= 16 %, and rounds short enough (10 kB) that a 100 ms
    # sample at a few Mbit/s sees many of them.
    quanta = [str(max(dcb.bw[tc], 1) * 100) for tc in bands[strict:]]
    band_of = {tc: i for i, tc in enumerate(bands)}
    priomap = [str(band_of[dcb.prio_tc[p % 8]]) for p in range(16)]
    args = ["bands", str(len(bands))]
    if strict:
        args += ["strict", str(strict)]
    if quanta:
        args += ["quanta", *quanta]
    return args + ["priomap", *priomap]


def pfc_thresholds(port):
    """(xoff, xon, headroom) in bytes of a switch port's bands that hold a
    PFC priority: the topology's pfc_xoff, pfc_xon, pfc_headroom, or
    derived from what drains the band, the port's rate (its link's speed
    without one, PFC_LINK_BPS without either). docs/pfc.md explains the defaults: xoff 20 ms of the
    port's rate, at least 16 full frames, so that the band does not run
    dry between XON and the senders' first frames; xon half of it;
    headroom what can arrive between XOFF and the senders' stop:
    PFC_REACTION_S at the port's link speed (PFC_LINK_BPS without one),
    at most 8 MiB."""
    link = (port.speed or 0) * 10**6 or PFC_LINK_BPS
    rate = port.rate_bps or link
    xoff = port.pfc_xoff or max(rate // 8 // 50, 16 * _FRAME)
    xon = port.pfc_xon if port.pfc_xon is not None else xoff // 2
    headroom = port.pfc_headroom or min(int(PFC_REACTION_S * link / 8),
                                        8 << 20)
    return xoff, xon, headroom


def pfc_bands(dcb):
    """The ETS qdisc's bands (0-based, port_bands order) that hold a PFC
    priority of dcb."""
    band_of = {tc: i for i, tc in enumerate(port_bands(dcb))}
    return sorted({band_of[dcb.prio_tc[p]] for p in dcb.pfc})


def pfcd_args(host):
    """pfcd's PORT:XOFF:XON:LIMIT operands for a switch (LIMIT: the bfifo
    of a band holding a PFC priority, xoff + headroom), or [] when no
    port has DCB (then it runs no agent). It runs without PFC too: it
    makes each port's ets qdisc follow the port's DCB state."""
    args = []
    for p in host.nics:
        if p.dcb:
            xoff, xon, headroom = pfc_thresholds(p)
            args.append(f"{p.name}:{xoff}:{xon}:{xoff + headroom}")
    return args


def pfcd_script(host, if_stopped=False):
    """The sh line starting the switch's DCB agent, or [] without DCB
    ports; if_stopped: only when it is not running (a restore)."""
    args = pfcd_args(host)
    if not args:
        return []
    start = f"{PFCD} start {' '.join(args)} >/dev/null"
    return [f"{PFCD} status >/dev/null 2>&1 || {start}" if if_stopped
            else start]


def tbf_burst(rate_bps):
    """The tbf bucket of a port shaped to rate_bps, in bytes."""
    # 20 ms at the port's rate, at least two full frames: a token bucket
    # smaller than one frame would never send it, and one that refills
    # less than a timer wakeup's worth caps the rate below the set one
    # (seen before the kernel had high-resolution timers: 5.5 of 10
    # Mbit/s, with the watchdog waking per 4 ms jiffy under TCG).
    return max(rate_bps // 8 // 50, 2 * 1522)


_APP_VERB = {"ethtype": "ethtype-prio", "stream-port": "stream-port-prio",
             "dgram-port": "dgram-port-prio", "port": "port-prio",
             "dscp": "dscp-prio"}


def dcb_batch(port):
    """`dcb -b` lines giving a port's driver its DCB configuration."""
    d = port.dcb
    lines = [
        f"ets set dev {port.name} "
        f"prio-tc {' '.join(f'{p}:{tc}' for p, tc in enumerate(d.prio_tc))} "
        f"tc-tsa {' '.join(f'{tc}:{t}' for tc, t in enumerate(d.tsa))} "
        f"tc-bw {' '.join(f'{tc}:{b}' for tc, b in enumerate(d.bw))}",
        f"pfc set dev {port.name} prio-pfc "
        + " ".join(f"{p}:{'on' if p in d.pfc else 'off'}" for p in range(8)),
    ]
    for a in d.apps:
        lines.append(f"app add dev {port.name} {_APP_VERB[a.selector]} "
                     f"{a.protocol}:{a.priority}")
    return lines


def port_qdiscs(port, between=None):
    """`tc -batch` lines making a port's egress qdiscs: its shaper (tbf
    1:) when it has a rate, ETS (ETS_HANDLE) under it when it has DCB.
    between=(HANDLE, "KIND ARGS..."): that qdisc goes between the two, ETS
    as its child (a fault on the wire: dcblab.lab.faults)."""
    lines, parent = [], "root"
    if port.rate_bps:
        lines.append(f"qdisc add dev {port.name} root handle 1: tbf "
                     f"rate {port.rate} burst {tbf_burst(port.rate_bps)} "
                     "latency 100ms")
        parent = "parent 1:1"
    if between:
        handle, qdisc = between
        lines.append(f"qdisc add dev {port.name} {parent} handle {handle} "
                     f"{qdisc}")
        parent = f"parent {handle}1"
    if port.dcb:
        lines.append(f"qdisc add dev {port.name} {parent} handle "
                     f"{ETS_HANDLE} ets {' '.join(ets_qdisc_args(port.dcb))}")
        # A lossless band holds xoff + headroom bytes: what pfcd's XOFF
        # lets arrive fits, what a stormed band gets is dropped there.
        xoff, _, headroom = pfc_thresholds(port)
        major = ETS_HANDLE.rstrip(":")
        # replace: pfcd may have made it first, from the port's DCB.
        for band in pfc_bands(port.dcb):
            lines.append(f"qdisc replace dev {port.name} parent "
                         f"{major}:{band + 1} handle {fifo_handle(band)} "
                         f"bfifo limit {xoff + headroom}")
    return lines


def fifo_handle(band):
    """The handle of the bfifo under a lossless band (0-based), as tc
    spells it (hex): 21: under band 1 ... 28: under band 8; pfcd makes
    the same when a band becomes lossless."""
    return f"{0x21 + band:x}:"


def enforced_script(host, timeout=10):
    """sh waiting until each of a switch's DCB ports has the ets qdisc its
    DCB in the topology asks for, and a bfifo under each band holding a
    PFC priority (exit 1, naming the port, if not within timeout
    seconds). pfcd programs them from the port's DCB state: while lldpad
    starts, it writes its defaults (one strict TC) to the drivers before
    the topology's configuration, and pfcd follows both (seen at every
    fabric `up`: a 1-band ets for ~0.6 s)."""
    checks = []
    for p in host.nics:
        if not p.dcb:
            continue
        checks.append(f"qdisc ets {ETS_HANDLE} dev {p.name} .* "
                      f"{' '.join(ets_qdisc_args(p.dcb))} *$")
        checks += [f"qdisc bfifo {fifo_handle(b)} dev {p.name} parent "
                   f"{ETS_HANDLE.rstrip(':')}:{b + 1} limit "
                   for b in pfc_bands(p.dcb)]
    if not checks:
        return ""
    # Each pattern matches one line at most: all of them match when the
    # count of matching lines is theirs. Two processes a round.
    grep = " ".join(f"-e '{c}'" for c in checks)
    ports = " ".join(p.name for p in host.nics if p.dcb)
    return (f"end=$((SECONDS + {timeout})); until [ \"$({TC} qdisc show | "
            f"grep -c {grep})\" = {len(checks)} ]; do "
            f"if [ $SECONDS -ge $end ]; then echo "
            f"'ets qdiscs of {ports} not as the topology says after "
            f"{timeout} s' >&2; exit 1; fi; sleep 0.1; done\n")


def trust_filters(port):
    """`tc -batch` lines of a port's ingress classification: with trust
    "dscp", an IP packet (untagged or tagged) whose DSCP has an APP entry
    on the port gets that entry's priority; then (both modes) a tagged
    frame gets its PCP. An untagged packet matching neither keeps
    priority 0."""
    dev, tc = port.name, []
    if port.trust == "dscp" and port.dcb:
        for a in port.dcb.apps:
            if a.selector != "dscp":
                continue
            for pref, proto, inner in _DSCP_PREFS:
                vlan = f"vlan_ethtype {inner} " if inner else ""
                tc.append(f"filter add dev {dev} ingress protocol {proto} "
                          f"pref {pref} handle {a.protocol + 1} flower "
                          f"{vlan}ip_tos {a.protocol << 2:#x}/0xfc "
                          f"action skbedit priority {a.priority}")
    for pcp in range(8):
        tc.append(f"filter add dev {dev} ingress protocol 802.1Q "
                  f"pref {TRUST_PREF} handle {pcp + 1} flower "
                  f"vlan_prio {pcp} action skbedit priority {pcp}")
    return tc


def switch_qos_script(host, dcb=True):
    """Trust filters (PCP, and DSCP where a port trusts it), shaper and
    ETS qdiscs, and (with dcb) the ports' DCB: the part of a switch's
    setup after the bridge. A restore redoes the qdiscs only (see
    dcblab.lab.baseline.restore)."""
    tc = []
    for port in host.nics:
        dev = port.name
        tc.append(f"qdisc add dev {dev} ingress")
        tc += trust_filters(port)
        tc += port_qdiscs(port)
    # One tc for all (`tc -batch`: a failing line is named as "-:N");
    # 30-odd tc runs took ~4 s of a switch's setup under TCG.
    sh = [f"{TC} -batch - <<'EOF'\n" + "\n".join(tc) + "\nEOF"]
    # One dcb run per line: `dcb -b` fails a "pfc set" that follows an
    # "ets set" in the same batch ("Attribute not found"), seen with
    # Debian's iproute2 6.1.
    sh += [f"{DCB} {line}" for port in host.nics if port.dcb and dcb
           for line in dcb_batch(port)]
    return sh


def switch_setup_script(host):
    """A switch's whole baseline as one sh script: NICs renamed to their
    port names (eth0 -> swp1 ...), all queue pairs on, the bridge, its
    VLANs, then switch_qos_script. The bridge's lines are one `ip -batch`
    and one `bridge -batch`."""
    sh, ip, br = [], [], []
    for port in host.nics:
        ip.append(f"link set dev eth{port.index} name {port.name}")
    # No STP (the parser refuses a loop through one switch), no multicast
    # snooping (IGMP queries would be the switch's own traffic on the
    # wire); forward_delay 0 so ports forward as soon as they are up.
    ip.append(f"link add {BRIDGE} type bridge vlan_filtering 1 "
              "mcast_snooping 0 stp_state 0 forward_delay 0")
    for port in host.nics:
        ip.append(f"link set dev {port.name} master {BRIDGE} up")
        br += [f"vlan add dev {port.name} vid {vid}"
               for vid in host.bridge_vlans]
    ip.append(f"link set dev {BRIDGE} up")
    sh.append(f"{IP} -batch - <<'EOF'\n" + "\n".join(ip) + "\nEOF")
    sh += [f"{ETHTOOL} -L {port.name} combined {port.queues}"
           for port in host.nics if port.queues > 1]
    sh += [f"{ETHTOOL} -s {port.name} speed {port.speed} duplex full"
           for port in host.nics if port.speed]
    if br:
        sh.append(f"{BR} -batch - <<'EOF'\n" + "\n".join(br) + "\nEOF")
    return "\n".join(sh + switch_qos_script(host) + pfcd_script(host)) \
        + "\n"


def run_script(machine, script, what="switch setup", timeout=30.0):
    """Run script (lines of commands) under ``sh -ex``: the first failing
    command stops it, and the error names that command and what it said,
    in one line."""
    res = machine.run(["/bin/sh", "-exc", script], timeout=timeout,
                      check=False)
    if res.rc == 0:
        return res
    lines = res.stderr.splitlines()
    last = max((i for i, ln in enumerate(lines) if ln.startswith("+ ")),
               default=None)
    failed = lines[last][2:] if last is not None else "?"
    # What the failed command said: only the lines after its trace, not
    # what earlier commands of the script printed (a tc batch's output).
    said = [ln for ln in lines[(last if last is not None else -1) + 1:]
            if ln.strip()]
    raise LabError(f"{machine.name}: {what} failed (rc {res.rc}) at "
                   f"`{failed}`: {' / '.join(said[-3:]) or 'no message'}")
