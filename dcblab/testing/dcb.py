"""DCB in the guests: what the dcbnl scenarios build on.

Reading goes through iproute2's ``dcb -j``; setting a valid configuration
too (the guests' ``dcb`` carries our fix of 6.1.0's reply handling,
iproute2-patches/). Invalid configurations go through ``dcbnl-raw``
(tools/dcbnl-raw.c), which sends the struct's bytes unchecked (``dcb``
refuses many of them itself) and names the errno the kernel answered:
dcbnl answers an IEEE set with a reply whose u8 attribute holds the
driver's error.
"""

from __future__ import annotations

import contextlib
import json
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, TypeVar, Union

from ..core.errors import ScenarioError
from ..lab.dcbx import ets_tlv_args
from .guest import Guest

if TYPE_CHECKING:
    from .handle import LabHandle

__all__ = ["TSA", "SEL", "dcb_show", "ets_bytes", "app_bytes", "pfc_bytes",
           "dcbnl_raw", "dcb_reset", "tx_queue_packets",
           "parse_tx_queue_packets", "TxQueueCounter", "tc_packets",
           "TcCounter", "queue_tcs", "ets_of", "pfc_of", "apps_of",
           "set_ets", "set_pfc", "add_app", "del_app", "LLDPTOOL",
           "lldp_set", "lldp_del_app", "ets_rec_args", "dcbx_port",
           "peer_tlv", "fresh_lldpad", "wait_for", "wait_for_dcbx",
           "lldpad_stopped", "switch_pfc_back"]

_T = TypeVar("_T")
# A TSA or selector: its name (TSA, SEL) or its number.
_Tsa = Union[str, int]
_Selector = Union[str, int]

# include/uapi/linux/dcbnl.h
TSA = {"strict": 0, "cbs": 1, "ets": 2, "vendor": 255}
SEL = {"ethtype": 1, "stream-port": 2, "dgram-port": 3, "port": 4, "dscp": 5}


def dcb_show(guest: Guest, what: str, dev: str = "eth0") -> dict[str, Any]:
    """``dcb -j WHAT show dev DEV`` as a dict."""
    return json.loads(guest.run(["dcb", "-j", what, "show", "dev",
                                 dev]).stdout)


def ets_bytes(*, prio_tc: Sequence[int] = (0,) * 8,
              tsa: Sequence[_Tsa] = ("strict",) * 8,
              bw: Sequence[int] = (0,) * 8,
              reco_prio_tc: Sequence[int] = (0,) * 8,
              reco_tsa: Sequence[_Tsa] = ("strict",) * 8,
              reco_bw: Sequence[int] = (0,) * 8, willing: int = 0,
              ets_cap: int = 8, cbs: int = 0) -> bytes:
    """struct ieee_ets as the kernel reads it (59 bytes). tsa entries are
    names of TSA or numbers (for values no name has)."""
    def tsas(values):
        return [TSA[v] if isinstance(v, str) else v for v in values]
    return struct.pack("3B8B8B8B8B8B8B8B", willing, ets_cap, cbs, *bw,
                       *bw, *tsas(tsa), *prio_tc, *reco_bw, *tsas(reco_tsa),
                       *reco_prio_tc)


def pfc_bytes(pfc_en: int = 0, *, mbc: int = 0, delay: int = 0) -> bytes:
    """struct ieee_pfc (136 bytes): pfc_cap 8, counters 0."""
    return struct.pack("<3BxH2x16Q", 8, pfc_en, mbc, delay, *([0] * 16))


def app_bytes(selector: _Selector, protocol: int, priority: int) -> bytes:
    """struct dcb_app: selector and priority u8, protocol u16 (host order:
    x86, little endian)."""
    sel = SEL[selector] if isinstance(selector, str) else selector
    return struct.pack("<BBH", sel, priority, protocol)


def dcbnl_raw(guest: Guest, dev: str, kind: str, value: bytes, *,
              delete: bool = False) -> str:
    """Send value unchecked (dcbnl-raw); the errno name the kernel
    answered, "" for 0."""
    argv = ["dcbnl-raw", "-j"] + (["-d"] if delete else []) + \
        [dev, kind, value.hex()]
    res = guest.run(argv, check=False)
    if res.rc not in (0, 1) or not res.stdout.strip():
        raise AssertionError(f"dcbnl-raw failed: rc {res.rc}: {res.stderr}")
    return json.loads(res.stdout)["name"]


def dcb_reset(guest: Guest, dev: str = "eth0") -> list[str]:
    """DEV's DCB back to the driver's defaults; the lines of what changed."""
    return guest.run(["dcbnl-raw", dev, "reset"]).stdout.splitlines()


def tx_queue_packets(guest: Guest, dev: str = "eth0") -> dict[int, int]:
    """{queue: packets} from virtio_net's per-queue ethtool counters."""
    return parse_tx_queue_packets(guest.run(["ethtool", "-S", dev]).stdout)


def parse_tx_queue_packets(out: str) -> dict[int, int]:
    """tx_queue_packets() of `ethtool -S` text."""
    counts = {}
    for line in out.splitlines():
        key, _, value = line.strip().partition(":")
        if key.startswith("tx_queue_") and key.endswith("_packets"):
            counts[int(key.split("_")[2])] = int(value)
    return counts


class TxQueueCounter:
    """Packets sent per TX queue since the counter was made."""

    def __init__(self, guest: Guest, dev: str = "eth0") -> None:
        self.guest, self.dev = guest, dev
        self.before = tx_queue_packets(guest, dev)

    def delta(self) -> dict[int, int]:
        """{queue: packets sent since creation}."""
        now = tx_queue_packets(self.guest, self.dev)
        return {q: n - self.before.get(q, 0) for q, n in now.items()}


def tc_packets(guest: Guest, dev: str = "eth0") -> dict[int, int]:
    """{traffic class: packets sent} of DEV's TX queues, by the classes
    the device has now (queue_tcs(): the driver's after an ETS set, or
    mqprio's); queues outside every class are left out."""
    return _per_tc(tx_queue_packets(guest, dev), queue_tcs(guest, dev))


def _per_tc(per_queue: Mapping[int, int],
            tcs: Mapping[int, int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for q, n in per_queue.items():
        if q in tcs:
            out[tcs[q]] = out.get(tcs[q], 0) + n
    return out


class TcCounter:
    """Packets sent per traffic class since the counter was made, by the
    queue-to-class map read when it was made (set the classes first)."""

    def __init__(self, guest: Guest, dev: str = "eth0") -> None:
        self.guest, self.dev = guest, dev
        self.tcs = queue_tcs(guest, dev)
        self.before = tx_queue_packets(guest, dev)

    def delta(self) -> dict[int, int]:
        """{traffic class: packets sent since creation}."""
        now = tx_queue_packets(self.guest, self.dev)
        return _per_tc({q: n - self.before.get(q, 0)
                        for q, n in now.items()}, self.tcs)


def queue_tcs(guest: Guest, dev: str = "eth0") -> dict[int, int]:
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


def ets_of(guest: Guest, dev: str = "eth0") -> dict[str, tuple]:
    """The driver's ETS as {prio_tc, tsa, bw}, each a tuple of 8."""
    e = dcb_show(guest, "ets", dev)
    return dict(prio_tc=tuple(e["prio_tc"]), tsa=tuple(e["tc_tsa"]),
                bw=tuple(e["tc_bw"]))


def pfc_of(guest: Guest, dev: str = "eth0") -> list[int]:
    """The priorities with PFC enabled in the driver, ascending."""
    return [p for p, on in enumerate(dcb_show(guest, "pfc", dev)["prio_pfc"])
            if on]


def apps_of(guest: Guest, dev: str = "eth0",
            selector: str = "dgram-port") -> list[tuple[int, int]]:
    """The driver's APP entries of one selector (a SEL name; by default
    UDP ports): sorted (protocol, prio)."""
    _selector_number(selector)
    key = selector.replace("-", "_") + "_prio"
    return sorted(tuple(e) for e in dcb_show(guest, "app", dev).get(key, []))


def _selector_number(selector: _Selector) -> int:
    if isinstance(selector, int):
        return selector
    if selector not in SEL:
        raise ScenarioError(f"APP selector {selector!r}: not one of "
                            f"{', '.join(SEL)}")
    return SEL[selector]


# --- setting DCB with iproute2's dcb (lldpad stopped) --------------------------

def set_ets(guest: Guest, prio_tc: Sequence[int], tsa: Sequence[str],
            bw: Sequence[int], dev: str = "eth0") -> None:
    """``dcb ets set``: priority p in class prio_tc[p]; class tc's TSA
    tsa[tc] ("strict" or "ets") and its share bw[tc] (ETS shares sum to
    100). A refusal raises CmdError. A running lldpad overwrites it with
    its own at its next LLDPDU: see lldpad_stopped()."""
    guest.run(["dcb", "ets", "set", "dev", dev,
               "prio-tc", *(f"{p}:{tc}" for p, tc in enumerate(prio_tc)),
               "tc-tsa", *(f"{tc}:{t}" for tc, t in enumerate(tsa)),
               "tc-bw", *(f"{tc}:{b}" for tc, b in enumerate(bw))])


def set_pfc(guest: Guest, prios: Iterable[int], dev: str = "eth0") -> None:
    """``dcb pfc set``: PFC on exactly the priorities prios (lldpad
    stopped, as for set_ets())."""
    on = set(prios)
    guest.run(["dcb", "pfc", "set", "dev", dev, "prio-pfc",
               *(f"{p}:{'on' if p in on else 'off'}" for p in range(8))])


def _app_argv(verb: str, selector: str, protocol: int, priority: int,
              dev: str) -> list[str]:
    _selector_number(selector)
    proto = f"0x{protocol:04x}" if selector == "ethtype" else str(protocol)
    return ["dcb", "app", verb, "dev", dev, f"{selector}-prio",
            f"{proto}:{priority}"]


def add_app(guest: Guest, selector: str, protocol: int, priority: int,
            dev: str = "eth0") -> None:
    """``dcb app add``: the APP entry "protocol of selector (a SEL name,
    e.g. "dgram-port" 4791) -> priority" (lldpad stopped, as for
    set_ets())."""
    guest.run(_app_argv("add", selector, protocol, priority, dev))


def del_app(guest: Guest, selector: str, protocol: int, priority: int,
            dev: str = "eth0") -> None:
    """``dcb app del``: withdraw an entry add_app() made."""
    guest.run(_app_argv("del", selector, protocol, priority, dev))


# --- lldpad (DCBX) -------------------------------------------------------------

LLDPTOOL = "/usr/sbin/lldptool"


def lldp_set(guest: Guest, tlv: str, *args: str, dev: str = "eth0") -> str:
    """``lldptool -T -i DEV -V TLV ARG...`` (e.g. "willing=yes")."""
    return guest.run([LLDPTOOL, "-T", "-i", dev, "-V", tlv, *args]).stdout


def lldp_del_app(guest: Guest, prio: int, sel: _Selector, proto: int,
                 dev: str = "eth0") -> str:
    """Withdraw a local APP entry (``lldptool -T -d ... app=P,S,PROTO``)."""
    sel = SEL[sel] if isinstance(sel, str) else sel
    return guest.run([LLDPTOOL, "-T", "-i", dev, "-V", "APP", "-d",
                      f"app={prio},{sel},{proto}"]).stdout


# lldptool's ETS-REC (and ETS-CFG) arguments for one configuration.
ets_rec_args = ets_tlv_args


def dcbx_port(guest: Guest, *, willing: bool,
              rec: Optional[Mapping[str, Sequence]] = None,
              pfc: Optional[Sequence[int]] = None,
              pfc_willing: Optional[bool] = None,
              app_tx: Optional[bool] = None, dev: str = "eth0") -> None:
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


def peer_tlv(guest: Guest, tlv: str, dev: str = "eth0") -> str:
    """A TLV as this guest's lldpad received it from the peer (text)."""
    return guest.run([LLDPTOOL, "-n", "-t", "-i", dev, "-V", tlv],
                     check=False).stdout


def fresh_lldpad(guests: Iterable[Guest], dev: str = "eth0") -> None:
    """lldpad stopped, the driver's DCB reset, lldpad started with fresh
    state, in each guest. Stopping lldpad leaves what it wrote to the
    driver (a peer's APP entries too): hence the reset in between."""
    guests = list(guests)
    for g in guests:
        g.run(["dcblab-lldpad", "stop"])
        g.run(["dcbnl-raw", dev, "reset"])
    for g in guests:
        g.run(["dcblab-lldpad", "start"])


def wait_for(what: str, read: Callable[[], _T], ok: Callable[[_T], bool],
             timeout: float = 15.0, interval: float = 0.1
             ) -> tuple[_T, float]:
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


def wait_for_dcbx(guest: Guest, *,
                  ets: Optional[Mapping[str, Sequence]] = None,
                  pfc: Optional[Iterable[int]] = None,
                  apps: Optional[Iterable[tuple[int, int]]] = None,
                  dev: str = "eth0", timeout: float = 20.0,
                  interval: float = 0.1) -> float:
    """Seconds until DEV's driver holds what DCBX should have given it:
    ets ({prio_tc, tsa, bw}, as ets_of() reads it), PFC on exactly pfc,
    the UDP APP entries apps ((port, prio), as apps_of() reads them);
    what is None is not looked at. TimeoutError names the guest, what
    was awaited and what the driver held last."""
    want: dict[str, Any] = {}
    if ets is not None:
        want["ets"] = {k: tuple(v) for k, v in ets.items()}
    if pfc is not None:
        want["pfc"] = sorted(pfc)
    if apps is not None:
        want["apps"] = sorted(tuple(a) for a in apps)
    reads = {"ets": ets_of, "pfc": pfc_of, "apps": apps_of}

    def read() -> dict[str, Any]:
        return {k: reads[k](guest, dev) for k in want}
    _, seconds = wait_for(f"{guest.name}:{dev}: DCBX gives the driver "
                          f"{want}", read, lambda v: v == want,
                          timeout=timeout, interval=interval)
    return seconds


@contextlib.contextmanager
def lldpad_stopped(guests: Iterable[Guest]) -> Iterator[None]:
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


def switch_pfc_back(lab: LabHandle) -> list[str]:
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
