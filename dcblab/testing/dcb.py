"""DCB in the guests: what the dcbnl scenarios build on.

Reading goes through iproute2's ``dcb -j``; setting a valid configuration
too (the guests' ``dcb`` carries our fix of 6.1.0's reply handling,
iproute2-patches/). Invalid configurations go through ``dcbnl-raw``
(tools/dcbnl-raw.c), which sends the struct's bytes unchecked (``dcb``
refuses many of them itself) and names the errno the kernel answered:
dcbnl answers an IEEE set with a reply whose u8 attribute holds the
driver's error.
"""

import contextlib
import json
import struct
import time

from ..lab.dcbx import ets_tlv_args

__all__ = ["TSA", "SEL", "dcb_show", "ets_bytes", "app_bytes", "pfc_bytes",
           "dcbnl_raw", "dcb_reset", "tx_queue_packets",
           "parse_tx_queue_packets", "TxQueueCounter",
           "queue_tcs", "ets_of", "pfc_of", "apps_of", "LLDPTOOL",
           "lldp_set", "lldp_del_app", "ets_rec_args", "dcbx_port",
           "peer_tlv", "fresh_lldpad", "wait_for", "lldpad_stopped",
           "switch_pfc_back"]

# include/uapi/linux/dcbnl.h
TSA = {"strict": 0, "cbs": 1, "ets": 2, "vendor": 255}
SEL = {"ethtype": 1, "stream-port": 2, "dgram-port": 3, "port": 4, "dscp": 5}


def dcb_show(guest, what, dev="eth0"):
    """``dcb -j WHAT show dev DEV`` as a dict."""
    return json.loads(guest.run(["dcb", "-j", what, "show", "dev",
                                 dev]).stdout)


def ets_bytes(*, prio_tc=(0,) * 8, tsa=("strict",) * 8, bw=(0,) * 8,
              reco_prio_tc=(0,) * 8, reco_tsa=("strict",) * 8,
              reco_bw=(0,) * 8, willing=0, ets_cap=8, cbs=0):
    """struct ieee_ets as the kernel reads it (59 bytes). tsa entries are
    names of TSA or numbers (for values no name has)."""
    def tsas(values):
        return [TSA[v] if isinstance(v, str) else v for v in values]
    return struct.pack("3B8B8B8B8B8B8B8B", willing, ets_cap, cbs, *bw,
                       *bw, *tsas(tsa), *prio_tc, *reco_bw, *tsas(reco_tsa),
                       *reco_prio_tc)


def pfc_bytes(pfc_en=0, *, mbc=0, delay=0):
    """struct ieee_pfc (136 bytes): pfc_cap 8, counters 0."""
    return struct.pack("<3BxH2x16Q", 8, pfc_en, mbc, delay, *([0] * 16))


def app_bytes(selector, protocol, priority):
    """struct dcb_app: selector and priority u8, protocol u16 (host order:
    x86, little endian)."""
    sel = SEL[selector] if isinstance(selector, str) else selector
    return struct.pack("<BBH", sel, priority, protocol)


def dcbnl_raw(guest, dev, kind, value, *, delete=False):
    """Send value unchecked (dcbnl-raw); the errno name the kernel
    answered, "" for 0."""
    argv = ["dcbnl-raw", "-j"] + (["-d"] if delete else []) + \
        [dev, kind, value.hex()]
    res = guest.run(argv, check=False)
    if res.rc not in (0, 1) or not res.stdout.strip():
        raise AssertionError(f"dcbnl-raw failed: rc {res.rc}: {res.stderr}")
    return json.loads(res.stdout)["name"]


def dcb_reset(guest, dev="eth0"):
    """DEV's DCB back to the driver's defaults; the lines of what changed."""
    return guest.run(["dcbnl-raw", dev, "reset"]).stdout.splitlines()


def tx_queue_packets(guest, dev="eth0"):
    """{queue: packets} from virtio_net's per-queue ethtool counters."""
    return parse_tx_queue_packets(guest.run(["ethtool", "-S", dev]).stdout)


def parse_tx_queue_packets(out):
    """tx_queue_packets() of `ethtool -S` text."""
    counts = {}
    for line in out.splitlines():
        key, _, value = line.strip().partition(":")
        if key.startswith("tx_queue_") and key.endswith("_packets"):
            counts[int(key.split("_")[2])] = int(value)
    return counts


class TxQueueCounter:
    """Packets sent per TX queue since the counter was made."""

    def __init__(self, guest, dev="eth0"):
        self.guest, self.dev = guest, dev
        self.before = tx_queue_packets(guest, dev)

    def delta(self):
        now = tx_queue_packets(self.guest, self.dev)
        return {q: n - self.before.get(q, 0) for q, n in now.items()}


def queue_tcs(guest, dev="eth0"):
    """{queue: traffic class} from sysfs; a queue outside every class (or
    a device with no classes) has no entry."""
    out = guest.run(["sh", "-c", f"cd /sys/class/net/{dev}/queues && "
                     "for q in tx-*; do echo $q $(cat $q/traffic_class "
                     "2>/dev/null); done"]).stdout
    tcs = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            tcs[int(parts[0][3:])] = int(parts[1])
    return tcs


def ets_of(guest, dev="eth0"):
    """The driver's ETS as {prio_tc, tsa, bw}, each a tuple of 8."""
    e = dcb_show(guest, "ets", dev)
    return dict(prio_tc=tuple(e["prio_tc"]), tsa=tuple(e["tc_tsa"]),
                bw=tuple(e["tc_bw"]))


def pfc_of(guest, dev="eth0"):
    """The priorities with PFC enabled in the driver, ascending."""
    return [p for p, on in enumerate(dcb_show(guest, "pfc", dev)["prio_pfc"])
            if on]


def apps_of(guest, dev="eth0"):
    """The driver's UDP (dgram port) APP entries: sorted (port, prio)."""
    return sorted(tuple(e) for e in
                  dcb_show(guest, "app", dev).get("dgram_port_prio", []))


# --- lldpad (DCBX) -------------------------------------------------------------

LLDPTOOL = "/usr/sbin/lldptool"


def lldp_set(guest, tlv, *args, dev="eth0"):
    """``lldptool -T -i DEV -V TLV ARG...`` (e.g. "willing=yes")."""
    return guest.run([LLDPTOOL, "-T", "-i", dev, "-V", tlv, *args]).stdout


def lldp_del_app(guest, prio, sel, proto, dev="eth0"):
    """Withdraw a local APP entry (``lldptool -T -d ... app=P,S,PROTO``)."""
    sel = SEL[sel] if isinstance(sel, str) else sel
    return guest.run([LLDPTOOL, "-T", "-i", dev, "-V", "APP", "-d",
                      f"app={prio},{sel},{proto}"]).stdout


# lldptool's ETS-REC (and ETS-CFG) arguments for one configuration.
ets_rec_args = ets_tlv_args


def dcbx_port(guest, *, willing, rec=None, pfc=None, pfc_willing=None,
              app_tx=None, dev="eth0"):
    """An 802.1Qaz port in lldpad: ETS-CFG (and PFC) willing or not, the
    ETS-REC rec (a dict for ets_rec_args) advertised, PFC enable bits pfc
    (a list of priorities); ETS-CFG, ETS-REC and PFC sent; APP sent if
    app_tx, by default only by an unwilling port.

    Why not APP from both: lldpad advertises its operational APP table,
    which holds the entries it learned from the peer, and installs the
    entries a peer advertises whether or not it is willing. With both
    sending APP, h1 echoes h2's entry back; once h2 withdraws it, an echo
    already on its way re-installs it on h2 as a peer entry, and from
    then on each side keeps it alive for the other (seen: 2 of 2 runs of
    the change-then-withdraw sequence, both drivers holding 4791:5 and
    4791:2 for good). The host end of a DCBX link is the willing one and
    learns APP from the switch; it has nothing of its own to advertise."""
    yn = "yes" if willing else "no"
    lldp_set(guest, "ETS-CFG", f"willing={yn}", "enableTx=yes", dev=dev)
    lldp_set(guest, "ETS-REC", "enableTx=yes",
             *(ets_rec_args(**rec) if rec else ()), dev=dev)
    pyn = yn if pfc_willing is None else ("yes" if pfc_willing else "no")
    lldp_set(guest, "PFC", f"willing={pyn}", "enableTx=yes",
             *([f"enabled={','.join(map(str, pfc)) or 'none'}"]
               if pfc is not None else ()), dev=dev)
    if app_tx is None:
        app_tx = not willing
    lldp_set(guest, "APP", f"enableTx={'yes' if app_tx else 'no'}", dev=dev)


def peer_tlv(guest, tlv, dev="eth0"):
    """A TLV as this guest's lldpad received it from the peer (text)."""
    return guest.run([LLDPTOOL, "-n", "-t", "-i", dev, "-V", tlv],
                     check=False).stdout


def fresh_lldpad(guests, dev="eth0"):
    """lldpad stopped, the driver's DCB reset, lldpad started with fresh
    state, in each guest. Stopping lldpad leaves what it wrote to the
    driver (a peer's APP entries too): hence the reset in between."""
    for g in guests:
        g.run(["dcblab-lldpad", "stop"])
        g.run(["dcbnl-raw", dev, "reset"])
    for g in guests:
        g.run(["dcblab-lldpad", "start"])


def wait_for(what, read, ok, timeout=15.0, interval=0.1):
    """Poll read() until ok(value); returns (value, seconds taken).
    TimeoutError names what was awaited and the last value read."""
    t0 = time.monotonic()
    while True:
        value = read()
        if ok(value):
            return value, time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"{what}: not within {timeout:g} s "
                               f"(last read: {value!r})")
        time.sleep(interval)


@contextlib.contextmanager
def lldpad_stopped(guests):
    """lldpad stopped in each guest that runs it, their DCB reset to the
    driver's defaults; started again after. A running DCBX agent owns the
    port's DCB: it writes its ETS, PFC and APP to the driver with every
    LLDPDU it builds."""
    running = [g for g in guests
               if g.run(["dcblab-lldpad", "status"], check=False).rc == 0]
    for g in running:
        g.run(["dcblab-lldpad", "stop"])
        g.run(["dcbnl-raw", "eth0", "reset"])
    try:
        yield
    finally:
        for g in running:
            g.run(["dcblab-lldpad", "start"])


def switch_pfc_back(lab):
    """Each switch port's PFC back to the topology's, through lldpad as
    its operator would (lldptool), where something left it otherwise,
    and once the hosts facing the switch have it again by DCBX. The
    restore between tests keeps a switch's DCB (lab.baseline.restore):
    a test that changes it puts it back itself, but a teaching lab that
    turns PFC off (labs 12 and 16) and stops at a failed step does not.
    Returns the ports put back."""
    fixed = []
    for sw in lab.topology.switches:
        g = lab.guest(sw.name)
        for port in sw.nics:
            want = list(port.dcb.pfc) if port.dcb else []
            if pfc_of(g, port.name) != want:
                lldp_set(g, "PFC",
                         f"enabled={','.join(map(str, want)) or 'none'}",
                         dev=port.name)
                fixed.append((g, port.name, want, port.peer))
    for g, dev, want, peer in fixed:
        wait_for(f"{g.name}:{dev}: PFC on {want}",
                 lambda g=g, dev=dev: pfc_of(g, dev), lambda v, w=want: v == w)
        host, nic = peer.split(":")
        if lab.topology.dcbx:
            wait_for(f"{peer}: PFC on {want} by DCBX",
                     lambda h=lab.guest(host), n=nic: pfc_of(h, n),
                     lambda v, w=want: v == w, timeout=20)
    return [dev for _, dev, _, _ in fixed]
