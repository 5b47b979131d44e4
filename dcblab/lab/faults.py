"""Faults on a lab's wire: netem in the guests, at each end of a link, and
the link's cable pulled or plugged.

Why in the guests and not on the host side of the link (the lab's netns):
the kernel a lab runs on may have no sch_netem (this machine's 6.18 has it
off and cannot load modules; on Debian it is a module), and dcblab never
loads a module on the host. The guests' kernel has it built in
(kernel-patches/lab.config). So a fault on a link is a netem qdisc at the
egress of each of its two ends: each end's netem acts on the frames that
end sends, so each direction of the link has its own fault and counters.

Where an end's netem goes (``plan()``), after every decision the frame
gets before a real wire sees it:

* a root ``mq`` or ``mqprio`` (a host's NIC; a switch port with neither
  rate nor DCB): one netem per TX queue, the child of each queue class,
  so priority -> TC -> queue, the VLAN tag and the PCP are all decided
  before the fault. The kernel's default ``mq`` (handle 0:, which it will
  not delete) is first replaced by an ``mq`` with handle FAULT_HANDLE:
  clearing the fault deletes that root and the kernel attaches its own
  default tree again, exactly as it was at boot. Under ``mqprio`` (a TC
  layout a test or user made) clearing puts the default qdisc back on
  each queue (same kind, new handle, fresh counters) and keeps mqprio;
* a single-queue NIC: netem at the root (FAULT_HANDLE); clearing deletes
  it, and the kernel's default comes back;
* a switch port with a shaper or ETS (dcblab.lab.switch): one netem
  above the ETS qdisc (under the shaper's tbf 1: when the port has a
  rate), and ETS made again as its child with its handle 10:. Never under
  an ETS band: ETS's DRR peeks the band at the head of its active list,
  and when a netem holding delayed frames returns none it sends nothing
  from any band (sch_ets warns of a non-work-conserving child). netem
  there gets ABOVE_ETS_LIMIT (its comment says why). Clearing makes the port's
  qdiscs again from the topology, as the baseline makes them.

The kernel allows a netem that duplicates only as the one netem of its
device (6.1.y's sch_netem, check_netem_in_tree: "cannot mix duplicating
netems with other netems in tree"): on a multi-queue NIC a duplicate
fault is set on one TX queue (``Fault.queues``).

netem counts what it sent (frames out, duplicates included), what it
dropped (its loss, and a full queue: ``limit``, 1000 frames) and, as
requeues, each frame it sent ahead of the others (reorder). It does not
count frames in, so how many it duplicated is sent + dropped - offered,
with offered known only to the sender. netem in Linux 6.1 has no seed
(TCA_NETEM_PRNG_SEED came in 2023, after 6.1; iproute2 6.1 has no
``seed``): each run draws anew, the counters say what happened.

A reset of a host (``dcblab reset``, the per-test restore) puts its
qdiscs back to the baseline, which has no fault: the faults at that
host's ends go. The cable's state is QEMU's and survives a reset.
"""

import concurrent.futures
import dataclasses
import json
import re
import time
from dataclasses import dataclass, field
from typing import Optional

from ..core.cmd import CmdError
from ..core.errors import DcblabError, UnknownName, UsageError
from ..guest.agent import AgentError
from .switch import ETS_HANDLE, port_qdiscs

__all__ = ["Fault", "FaultError", "NetemCounters", "End", "LinkFaults",
           "FAULT_HANDLE", "NETEM_LIMIT", "ABOVE_ETS_LIMIT", "make_fault",
           "percent", "netem_time", "plan", "clear_plan", "netem_counters",
           "describe_netem", "read_end"]

# The qdisc dcblab adds at an end: the mq it puts at a NIC's root to hang
# per-queue netems under, or the one netem of a single-queue NIC or a
# switch port.
FAULT_HANDLE = "fa00:"
NETEM_LIMIT = 1000    # netem's own default queue, in frames
# netem's limit above a switch port's ETS. netem counts the frames its
# child holds against its limit (its qlen covers both), so with its
# default of 1000 it dropped the port's excess itself, blind to classes,
# before ETS's bands (a pfifo of txqueuelen, 1000 frames, each) filled:
# ETS then enforced nothing (measured on dcb-fabric's swp3: 33/31/36 %
# for classes configured 20/30/50). With room for every band (8 at most)
# and more, the drops are ETS's again.
ABOVE_ETS_LIMIT = 10000
TC = "/sbin/tc"     # in sh: busybox's own tc applet comes first otherwise
_SEP = "--dcblab--"
# tc -s -j qdisc show, the default qdisc and the carrier, in one command.
_READ = (f'{TC} -s -j qdisc show dev "$1" && echo {_SEP} && '
         'cat /proc/sys/net/core/default_qdisc && '
         '{ cat "/sys/class/net/$1/carrier" 2>/dev/null || echo -; }')
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)%?")
_TIME = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s)")


class FaultError(DcblabError):
    """A fault could not be set or cleared where it was asked for."""


@dataclass(frozen=True)
class Fault:
    """What netem does to the frames an end sends. Percentages 0..100;
    delay and jitter in netem's words ("10ms"); limit: netem's queue in
    frames (0: netem's default, 1000); queues: the TX queues (0-based) it
    applies to, () for all."""
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    gap: int = 0
    corrupt: float = 0.0
    delay: str = ""
    jitter: str = ""
    limit: int = 0
    queues: tuple = ()

    def netem(self, limit=None):
        """`tc qdisc ... netem` arguments (limit: instead of self.limit).
        corrupt is always given: a netem change keeps the corruption it
        had when the request leaves it out (netem_change reads
        TCA_NETEM_CORRUPT only if present); limit too (netem's default)."""
        args = ["limit", str(limit or self.limit or NETEM_LIMIT)]
        if self.delay:
            args += ["delay", self.delay] + ([self.jitter] if self.jitter
                                             else [])
        args += ["loss", _pct(self.loss), "duplicate", _pct(self.duplicate)]
        if self.reorder:
            args += ["reorder", _pct(self.reorder)]
            if self.gap:
                args += ["gap", str(self.gap)]
        return args + ["corrupt", _pct(self.corrupt)]

    def __str__(self):
        parts = [f"{name} {_pct(getattr(self, name))}"
                 for name in ("loss", "duplicate", "corrupt")
                 if getattr(self, name)]
        if self.delay:
            parts.append(f"delay {self.delay}"
                         + (f" jitter {self.jitter}" if self.jitter else ""))
        if self.reorder:
            parts.append(f"reorder {_pct(self.reorder)}"
                         + (f" gap {self.gap}" if self.gap else ""))
        if self.limit:
            parts.append(f"limit {self.limit}")
        what = ", ".join(parts) or "none (netem passes every frame)"
        if self.queues:
            what += f" on TX queue{'s' if len(self.queues) > 1 else ''} " \
                    + ",".join(map(str, self.queues))
        return what


def _pct(value):
    return f"{value:g}%"


def percent(text, option):
    """A percentage ("5%", "0.5", "100%") as a float 0..100."""
    m = _PERCENT.fullmatch(str(text).strip())
    if not m or float(m.group(1)) > 100:
        raise UsageError(f"{option} {text!r}: not a percentage: give 0 to "
                         "100, e.g. 5% or 0.5")
    return float(m.group(1))


def netem_time(text, option):
    """A time as netem takes it: a number and us, ms or s."""
    text = str(text).strip()
    if not _TIME.fullmatch(text):
        raise UsageError(f"{option} {text!r}: not a time: give a number "
                         "and us, ms or s, e.g. 10ms")
    return text


def make_fault(*, loss=None, duplicate=None, reorder=None, gap=None,
               corrupt=None, delay=None, jitter=None, limit=None, queues=()):
    """A Fault from the CLI's words (None: not given); UsageError naming
    the option for a bad value or a combination netem cannot do."""
    f = Fault(
        loss=percent(loss, "--loss") if loss is not None else 0.0,
        duplicate=(percent(duplicate, "--duplicate")
                   if duplicate is not None else 0.0),
        reorder=percent(reorder, "--reorder") if reorder is not None else 0.0,
        gap=int(gap or 0),
        corrupt=percent(corrupt, "--corrupt") if corrupt is not None else 0.0,
        delay=netem_time(delay, "--delay") if delay is not None else "",
        jitter=netem_time(jitter, "--jitter") if jitter is not None else "",
        limit=int(limit or 0), queues=tuple(sorted(set(queues))))
    if limit is not None and f.limit < 1:
        raise UsageError(f"--limit {limit}: give netem's queue in frames, 1 "
                         "or more")
    if gap is not None and f.gap < 1:
        raise UsageError(f"--gap {gap}: give a count of frames, 1 or more")
    if f.reorder and not f.delay:
        raise UsageError(f"--reorder {reorder}: netem reorders by sending "
                         "some frames at once while the others wait --delay: "
                         "give --delay too (e.g. --delay 10ms)")
    if f.gap and not f.reorder:
        raise UsageError(f"--gap {gap}: it spaces netem's reordering: give "
                         "--reorder too (e.g. --reorder 100% --gap 5)")
    if f.jitter and not f.delay:
        raise UsageError(f"--jitter {jitter}: it varies --delay: give "
                         "--delay too")
    if any(q < 0 for q in f.queues):
        raise UsageError(f"--queue {min(f.queues)}: TX queues count from 0")
    return f


# --- reading an end ----------------------------------------------------------

@dataclass(frozen=True)
class NetemCounters:
    """One netem of an end, as `tc -s -j` shows it."""
    queue: Optional[int]   # its TX queue (per-queue placement), else None
    handle: str
    parent: str
    fault: str             # its options, in words (describe_netem)
    sent: int              # frames it sent (duplicates included)
    dropped: int           # its loss, and frames refused when full
    requeues: int          # frames it sent ahead of the others (reorder)
    backlog: int           # frames it holds now
    # Frames its child (a switch port's ETS) refused: netem counts them
    # in its own drops too (netem_dequeue); ``dropped`` leaves them out.
    child_dropped: int = 0

    def json(self):
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class End:
    """One end of a link: its carrier, where its fault sits, its netems."""
    nic: str               # "h1:eth0"
    toward: str            # the other end, "h2:eth0"
    carrier: Optional[bool]   # None: the device is down (no carrier to read)
    placement: str         # where the netems are, "" without a fault
    netems: tuple = field(default=())

    @property
    def fault(self):
        """The fault in words ("" without one); netems with different
        options are each named with their TX queues."""
        groups = {}
        for n in self.netems:
            groups.setdefault(n.fault, []).append(n.queue)
        if len(groups) <= 1:
            return next(iter(groups), "")
        return "; ".join(f"{what} (TX queue {_ranges(qs)})"
                         for what, qs in groups.items())

    def total(self, key):
        return sum(getattr(n, key) for n in self.netems)

    def json(self):
        return {"end": self.nic, "toward": self.toward,
                "carrier": self.carrier, "placement": self.placement,
                "fault": self.fault,
                **{k: self.total(k) for k in ("sent", "dropped", "requeues",
                                              "backlog", "child_dropped")},
                "netems": [n.json() for n in self.netems]}


def describe_netem(options):
    """A netem's options (tc -j) in words, as `dcblab link` sets them."""
    parts = []
    for key, sub in (("loss-random", "loss"), ("duplicate", "duplicate"),
                     ("corrupt", "corrupt")):
        value = options.get(key, {}).get(sub, 0)
        if value:
            parts.append(f"{sub} {_pct(round(value * 100, 4))}")
    delay = options.get("delay", {})
    if delay.get("delay"):
        parts.append(f"delay {_seconds(delay['delay'])}"
                     + (f" jitter {_seconds(delay['jitter'])}"
                        if delay.get("jitter") else ""))
    if options.get("gap"):
        reorder = options.get("reorder", {}).get("reorder", 1)
        parts.append(f"reorder {_pct(round(reorder * 100, 4))} gap "
                     f"{options['gap']}")
    if options.get("limit", NETEM_LIMIT) != NETEM_LIMIT:
        parts.append(f"limit {options['limit']}")
    return ", ".join(parts) or "none (netem passes every frame)"


def _seconds(s):
    if s >= 1:
        return f"{s:g}s"
    if s >= 1e-3:
        return f"{round(s * 1e3, 3):g}ms"
    return f"{round(s * 1e6, 3):g}us"


def _num(handle):
    """A handle's or parent's major (or minor) number from tc's hex."""
    return int(handle or "0", 16)


def _root(qdiscs):
    for q in qdiscs:
        if q.get("root"):
            return q
    raise FaultError("no root qdisc in `tc qdisc show`")


def _children(qdiscs, root):
    """{class minor: qdisc} of the root's direct children."""
    major = _num(root["handle"].split(":")[0])
    out = {}
    for q in qdiscs:
        maj, _, minor = q.get("parent", "").partition(":")
        if "parent" in q and _num(maj) == major and minor:
            out[_num(minor)] = q
    return out


def _per_queue(root):
    return root["kind"] in ("mq", "mqprio")


def netem_counters(qdiscs):
    """The netems among an end's qdiscs (tc -s -j), in queue order."""
    root = _root(qdiscs)
    queue_of = {}
    if _per_queue(root):
        queue_of = {id(q): minor - 1
                    for minor, q in _children(qdiscs, root).items()}
    found = []
    for q in qdiscs:
        if q["kind"] != "netem":
            continue
        child = sum(c.get("drops", 0) for c in qdiscs
                    if c.get("parent") == f"{q['handle']}1")
        found.append(NetemCounters(
            queue=queue_of.get(id(q)), handle=q["handle"],
            parent=q.get("parent", "root"),
            fault=describe_netem(q.get("options", {})),
            sent=q.get("packets", 0), dropped=q.get("drops", 0) - child,
            requeues=q.get("requeues", 0), backlog=q.get("qlen", 0),
            child_dropped=child))
    return tuple(sorted(found, key=lambda n: (n.queue is None, n.queue or 0)))


def _placement(nic, qdiscs, netems):
    """Where an end's netems sit, in words ("" without any)."""
    if not netems:
        return ""
    root = _root(qdiscs)
    above = f", above ETS {ETS_HANDLE}" if nic.dcb else ""
    if _per_queue(root):
        queues = [n.queue for n in netems]
        return (f"TX queue{'s' if len(queues) > 1 else ''} "
                f"{_ranges(queues)} of {len(_children(qdiscs, root))} "
                f"(under {root['kind']} {root['handle']})")
    if root["kind"] == "netem":
        return f"root{above}"
    return f"under {root['kind']} {root['handle']}{above}"


def _ranges(numbers):
    """[0, 1, 2, 5] -> "0-2,5"."""
    out, run = [], []
    for n in sorted(x for x in numbers if x is not None):
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            out.append(_run(run))
        run = [n]
    if run:
        out.append(_run(run))
    return ",".join(out)


def _run(run):
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


# --- planning ----------------------------------------------------------------

def _shaped_or_scheduled(nic, is_switch):
    return is_switch and (nic.rate_bps or nic.dcb)


def plan(nic, is_switch, qdiscs, fault, default_qdisc, end=None):
    """`tc -batch` lines that give NIC (its qdiscs as `tc -j qdisc show`
    lists them) exactly FAULT: netems where the module docstring says,
    and none on the queues it leaves out. ``end`` names it in errors."""
    end = end or f"{nic.host}:{nic.name}"
    dev = nic.name
    root = _root(qdiscs)
    args = " ".join(fault.netem())
    ours = [q for q in qdiscs if q["kind"] == "netem"]
    if _shaped_or_scheduled(nic, is_switch):
        args = " ".join(fault.netem(max(fault.limit, ABOVE_ETS_LIMIT)
                                    if nic.dcb else None))
        if fault.queues:
            raise UsageError(f"{end}: a switch port with a shaper or ETS "
                             "has one netem, above its ETS qdisc: --queue "
                             "does not apply")
        if any(q["handle"] == FAULT_HANDLE for q in ours):
            return [f"qdisc change dev {dev} handle {FAULT_HANDLE} netem "
                    f"{args}"]
        _check_port_root(nic, root, end)
        return [f"qdisc del dev {dev} root"] + \
            port_qdiscs(nic, (FAULT_HANDLE, f"netem {args}"))
    if _per_queue(root):
        classes = _children(qdiscs, root)
        queues = fault.queues or tuple(range(len(classes)))
        bad = [q for q in queues if q + 1 not in classes]
        if bad:
            raise UsageError(f"--queue {bad[0]}: {end} has TX queues 0-"
                             f"{len(classes) - 1}")
        if fault.duplicate and len(queues) > 1:
            raise UsageError(
                f"--duplicate {_pct(fault.duplicate)}: the kernel allows a "
                "netem that duplicates only as the one netem of a device, "
                f"and {end} has {len(classes)} TX queues with one each: give "
                "--queue N (the TX queue whose frames are duplicated)")
        lines = []
        major = root["handle"]
        if root["kind"] == "mq" and _num(major.split(":")[0]) == 0:
            lines.append(f"qdisc replace dev {dev} root handle {FAULT_HANDLE} "
                         "mq")
            major, classes = FAULT_HANDLE, {}
        had = {minor - 1 for minor, q in classes.items()
               if q["kind"] == "netem"}
        # In this order, so that no step leaves a duplicating netem beside
        # another one (the kernel refuses it): the netems of the queues
        # left out go, those kept change, then the new ones come.
        lines += [f"qdisc replace dev {dev} parent {major}{q + 1:x} "
                  f"{default_qdisc}" for q in sorted(had - set(queues))]
        lines += [f"qdisc replace dev {dev} parent {major}{q + 1:x} netem "
                  f"{args}" for q in sorted(had & set(queues))]
        lines += [f"qdisc replace dev {dev} parent {major}{q + 1:x} netem "
                  f"{args}" for q in queues if q not in had]
        return lines
    ours_at_root = root["kind"] == "netem" and root["handle"] == FAULT_HANDLE
    default_root = not _children(qdiscs, root) and \
        _num(root["handle"].split(":")[0]) == 0
    if ours_at_root or default_root:
        if [q for q in fault.queues if q != 0]:
            raise UsageError(f"--queue {max(fault.queues)}: {end} has one "
                             "TX queue, 0")
        return [f"qdisc replace dev {dev} root handle {FAULT_HANDLE} netem "
                f"{args}"]
    raise _foreign_root(end, root)


def clear_plan(nic, is_switch, qdiscs, default_qdisc):
    """`tc -batch` lines that take NIC's faults off (none if it has
    none)."""
    dev = nic.name
    root = _root(qdiscs)
    if not any(q["kind"] == "netem" for q in qdiscs):
        return []
    if _shaped_or_scheduled(nic, is_switch):
        return [f"qdisc del dev {dev} root"] + port_qdiscs(nic)
    if root["handle"] == FAULT_HANDLE:
        # Our mq or our root netem: the kernel's default tree comes back.
        return [f"qdisc del dev {dev} root"]
    if _per_queue(root):
        return [f"qdisc replace dev {dev} parent {root['handle']}{minor:x} "
                f"{default_qdisc}"
                for minor, q in sorted(_children(qdiscs, root).items())
                if q["kind"] == "netem"]
    raise _foreign_root(f"{nic.host}:{nic.name}", root)


def _check_port_root(nic, root, end):
    want = ("tbf", "1:") if nic.rate_bps else ("ets", ETS_HANDLE)
    if (root["kind"], root["handle"]) != want:
        raise FaultError(
            f"{end}: its root qdisc ({root['kind']} {root['handle']}) is not "
            f"the port's ({want[0]} {want[1]}, from the topology): `dcblab "
            f"reset {nic.host}` puts it back; then set the fault")


def _foreign_root(end, root):
    return FaultError(
        f"{end}: a fault cannot go under its root qdisc ({root['kind']} "
        f"{root['handle']}): it goes under mq or mqprio (one netem per TX "
        "queue) or at the root of a single-queue NIC; remove that qdisc "
        f"(`dcblab reset {end.split(':')[0]}`) and set the fault again")


# --- in the guests -----------------------------------------------------------

def read_end(machine, dev):
    """(qdiscs, default qdisc, carrier) of DEV in one guest command."""
    try:
        out = machine.run(["/bin/sh", "-c", _READ, "sh", dev]).stdout
    except CmdError as e:
        raise FaultError(f"{machine.name}:{dev}: cannot read its qdiscs: "
                         f"{_last_line(e.stderr)}") from None
    tc, _, rest = out.partition(f"{_SEP}\n")
    default, carrier = (rest.split() + ["pfifo_fast", "-"])[:2]
    return (json.loads(tc), default,
            {"1": True, "0": False}.get(carrier))


def _last_line(text):
    lines = [x for x in (text or "").splitlines() if x.strip()]
    return lines[-1].strip() if lines else "no message"


def _batch(machine, lines, end, what):
    if not lines:
        return
    try:
        machine.run(["tc", "-batch", "-"], input="\n".join(lines) + "\n")
    except CmdError as e:
        said = " / ".join(x.strip() for x in e.stderr.splitlines()
                          if x.strip())
        raise FaultError(f"{end}: tc refused to {what}: {said or e}") \
            from None


class LinkFaults:
    """One link of a running lab: the faults at its ends and its cable.

    ``lab`` is a Lab (its topology, and the keeper for the cable);
    ``guests`` maps host names to what runs commands there (default: the
    lab's machines; tests give their recording Guests)."""

    CARRIER_TIMEOUT = 10.0

    def __init__(self, lab, link, guests=None):
        self.lab = lab
        self.link = lab.topology.link(link)
        self._guests = dict(guests or {})

    def guest(self, host):
        return self._guests.get(host) or self.lab.machine(host)

    def ends(self, only=None):
        """[(nic, peer nic)], both ends or the one on host ``only``."""
        a, b = self.link.a, self.link.b
        pairs = [(a, b), (b, a)]
        if only is None:
            return pairs
        chosen = [p for p in pairs if p[0].host == only]
        if not chosen:
            raise UnknownName(f"link {self.link.name}: no end on {only!r} "
                              f"(its ends: {_name(a)}, {_name(b)})")
        return chosen

    def _each(self, fn, items):
        """fn(item) for each item, the guests in parallel; the first
        error is raised once all are done."""
        with concurrent.futures.ThreadPoolExecutor(len(items)) as pool:
            futures = [pool.submit(fn, item) for item in items]
            return [f.result() for f in futures]

    def show(self, only=None):
        """[End] for both ends (or the one on host ``only``), as the
        guests report them now."""
        return self._each(lambda pair: self._show(*pair), self.ends(only))

    def _show(self, nic, peer):
        qdiscs, _, carrier = read_end(self.guest(nic.host), nic.name)
        netems = netem_counters(qdiscs)
        return End(_name(nic), _name(peer), carrier,
                   _placement(nic, qdiscs, netems), netems)

    def set(self, fault, only=None):
        """Give the ends (both, or the one on host ``only``) exactly
        FAULT. Every end is read and planned before any changes (so a
        fault an end cannot take changes nothing); if tc then refuses at
        an end, the faults are taken off every end this call was for."""
        ends = [nic for nic, _ in self.ends(only)]
        planned = self._each(lambda nic: self._plan(nic, fault), ends)
        try:
            self._each(lambda item: _batch(*item, f"set the fault ({fault})"),
                       planned)
        except DcblabError as e:
            try:
                self.clear(only)
                undone = "the faults were taken off " + \
                    " and ".join(map(_name, ends))
            except DcblabError as e2:
                undone = f"taking the faults off failed too: {e2}"
            raise FaultError(f"{e}; {undone}") from None
        return self.show()

    def _plan(self, nic, fault):
        m = self.guest(nic.host)
        qdiscs, default, _ = read_end(m, nic.name)
        lines = plan(nic, self._is_switch(nic), qdiscs, fault, default)
        return m, lines, _name(nic)

    def clear(self, only=None):
        """Take the faults off the ends (both, or the one on ``only``)."""
        self._each(self._clear, [nic for nic, _ in self.ends(only)])
        return self.show()

    def _clear(self, nic):
        m = self.guest(nic.host)
        qdiscs, default, _ = read_end(m, nic.name)
        lines = clear_plan(nic, self._is_switch(nic), qdiscs, default)
        _batch(m, lines, _name(nic), "clear the fault")

    def _is_switch(self, nic):
        return self.lab.topology.host(nic.host).is_switch

    # --- the cable ---------------------------------------------------------

    def cable(self, plugged):
        """Pull (False) or plug (True) the link's cable: each end's NIC
        loses or gets its carrier (the backend's set_link, through the
        keeper). Returns once both guests see it; seconds taken."""
        t0 = time.monotonic()
        for nic, _ in self.ends():
            self.lab.request({"op": "set_link", "host": nic.host,
                              "nic": nic.name, "up": bool(plugged)},
                             timeout=30)
        self._each(lambda pair: self._wait_carrier(pair[0], plugged),
                   self.ends())
        return time.monotonic() - t0

    def cut(self):
        return self.cable(False)

    def plug(self):
        return self.cable(True)

    def _wait_carrier(self, nic, want):
        m = self.guest(nic.host)
        path = f"/sys/class/net/{nic.name}/carrier"
        deadline = time.monotonic() + self.CARRIER_TIMEOUT
        seen = None
        while True:
            try:
                seen = m.agent.read_file(path).decode().strip() == "1"
            except AgentError as e:
                seen = f"unreadable ({e})"
            if seen is want:
                return
            if time.monotonic() > deadline:
                raise FaultError(
                    f"{_name(nic)}: carrier {'off' if want else 'on'} "
                    f"{self.CARRIER_TIMEOUT:g} s after the cable was "
                    f"{'plugged' if want else 'pulled'} (last read: {seen})")
            time.sleep(0.05)


def _name(nic):
    return f"{nic.host}:{nic.name}"
