"""What a failed test leaves behind: the guests' state, summed up for the
report and kept whole under an artefact folder.

``gather(guests)`` asks each live guest (in parallel, one guest command
each) for:

  procs      traffic tools still running (priosend, priosink, cgwrite)
  ip-link    ``ip -s -d link``: counters, and each VLAN's QoS maps
  tc-qdisc   ``tc -s qdisc``
  tc-filter  ``tc -s filter`` on ingress (and egress) of every device
             with an ingress or clsact qdisc: the per-PCP flower counters
  cgroup     every net_prio cgroup's prioidx and ifpriomap, every net_cls
             cgroup's classid, and the processes in each
  vlan       /proc/net/vlan/*: each VLAN device's QoS maps
  trace      each tracefs instance: enabled events and their filters,
             entries + overrun of its buffers, hits per event (of the
             instance's one event: entries + overrun; of several: counted
             in the buffer) and its last lines, the buffer read only when
             it holds at most TRACE_READ_MAX lines
  lldpad     in a lab with dcbx: ``dcblab-lldpad status`` (lldpad's pid)
             and lldpad's log, /run/lldpad.log (its last LLDPAD_READ_MAX
             lines); nothing where lldpad never ran. Likewise
             dcbapp-netprio's status and log, /run/dcbapp-netprio.log,
             where the daemon ran

An item that fails is noted with its exit code or error, never raised:
the evidence must not hide the failure it is about. ``sections()`` makes
the report's short sections from it and the tests' command history;
``save()`` writes everything, one file per item, to the test's folder.

A lab that fails while it starts (a fixture's set-up) has no guest to
ask, and its keeper removes its run directory, logs included, before
``up`` returns. ``RunLogs`` holds every log of a starting lab's run
directory open as it appears (a file outlives its name while it is
open), so that ``save_logs()`` can still write its consoles, QEMU logs
and keeper log to the artefact folder.
"""

import concurrent.futures
import os
import re
import shutil
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..lab import DCBAPP_LOG, LLDPAD_LOG
from .guest import Command, Guest, clip

__all__ = ["TOOLS", "TRACE_READ_MAX", "LLDPAD_READ_MAX", "LLDPAD_SHOWN",
           "Item", "GuestEvidence", "gather", "sections", "save",
           "artefact_dir", "filter_counters", "RunLogs", "save_logs"]

TOOLS = ("priosend", "priosink")
TRACE_READ_MAX = 1000
# lldpad's log: lines read into the artefacts, lines shown in the report.
LLDPAD_READ_MAX = 2000
LLDPAD_SHOWN = 15

# One shell script, not one agent command per item: under TCG each guest
# command costs 15 ms and more, an ip or tc run 50-80 ms. Full paths for
# ip and tc: busybox sh runs its own (lesser) applets before PATH.
# Each item starts with "@@dcblab-item KIND NAME"; a failed step adds
# "@@dcblab-exit RC" to its item.
_SCRIPT = r"""
IP=/sbin/ip TC=/sbin/tc T=/sys/kernel/tracing CG=/sys/fs/cgroup
item() { echo "@@dcblab-item $*"; }
st() { r=$?; [ $r = 0 ] || echo "@@dcblab-exit $r"; }
# Files are read by shell builtins: a fork costs milliseconds under TCG.
show() { { while IFS= read -r l || [ -n "$l" ]; do echo "$l"; done \
	   < "$1"; } 2>&1; }
value() { { read -r v < "$1" && echo "$v"; } 2>&1; }
item procs
ps -o pid,stat,args | awk 'NR == 1 || /prio(send|sink)|cgwrite/ && !/awk/'
item ip-link
$IP -s -d link show 2>&1; st
item tc-qdisc
q=$($TC -s qdisc show 2>&1); r=$?
echo "$q"; (exit $r); st
for d in $(echo "$q" | awk '$1 == "qdisc" && ($2 == "clsact" ||
			    $2 == "ingress") { print $5 ":" $2 }'); do
	dirs=ingress
	[ "${d#*:}" = clsact ] && dirs="ingress egress"
	for dir in $dirs; do
		item tc-filter "${d%:*} $dir"
		$TC -s filter show dev "${d%:*}" $dir 2>&1; st
	done
done
for ctl in net_prio net_cls; do
	[ -d $CG/$ctl ] || { item cgroup $CG/$ctl; echo "not mounted";
			     echo "@@dcblab-exit 1"; continue; }
	find $CG/$ctl -type d | sort | while read -r d; do
		item cgroup "$d"
		if [ "$d" != $CG/$ctl ]; then
			p=
			while read -r x; do p="$p $x"; done < "$d/cgroup.procs"
			echo "procs:$p"
		fi
		if [ $ctl = net_prio ]; then
			echo "prioidx: $(value "$d/net_prio.prioidx")"
			show "$d/net_prio.ifpriomap"; st
		else
			echo "classid: $(value "$d/net_cls.classid")"
		fi
	done
done
for f in /proc/net/vlan/*; do
	[ -f "$f" ] || continue
	item vlan "${f##*/}"
	show "$f"; st
done
for i in $T $T/instances/*; do
	[ -d "$i/events" ] || continue
	item trace "${i#$T/instances/}"
	echo "tracing_on: $(value $i/tracing_on)"
	n=0
	while read -r ev; do
		n=$((n + 1))
		[ $n = 1 ] && one=$ev
		# cat: an event's filter file answers only a read at
		# offset 0, and the shell's read builtin reads bytewise.
		[ $n -le 20 ] && echo "event: $ev filter:" \
		    "$(cat "$i/events/${ev%%:*}/${ev#*:}/filter" 2>&1)"
	done < $i/set_event
	echo "events enabled: $n"
	e=0 o=0
	for s in $i/per_cpu/cpu*/stats; do
		while read -r k v; do
			case $k in
			entries:) e=$((e + v)) ;;
			overrun:) o=$((o + v)) ;;
			esac
		done < $s
	done
	echo "entries: $e"
	echo "overrun: $o"
	# One event: its hits are entries + overrun, exact even when the
	# buffer wrapped.
	[ $n = 1 ] && echo "hits: $one: $((e + o))"
	# Reading the buffer costs about 0.4 ms a line.
	if [ $e -gt 0 ] && [ $e -le @MAX@ ]; then
		tmp=/tmp/dcblab-evidence.$$
		grep -v '^#' $i/trace > $tmp
		[ $n -gt 1 ] && awk '{ for (k = 1; k < NF; k++)
			if ($k ~ /^[0-9]+\.[0-9]+:$/) { c[$(k + 1)]++; break } }
		     END { for (e in c) print "hits: " e " " c[e] }' $tmp
		echo "last lines:"
		tail -n 5 $tmp
		rm -f $tmp
	fi
done
# Only where lldpad (dcbx) or dcbapp-netprio ran: the log outlives the
# daemon, and says why it died. daemon STATUS-ITEM SCRIPT LOG
daemon() {
	[ -f $3 ] || return 0
	item lldpad $1
	/sbin/$2 status 2>&1
	item lldpad $3
	tail -n @LLDPAD_MAX@ $3 2>&1; st
}
daemon status dcblab-lldpad @LLDPAD_LOG@
daemon "dcbapp-netprio status" dcblab-dcbapp @DCBAPP_LOG@
""".replace("@MAX@", str(TRACE_READ_MAX)) \
    .replace("@LLDPAD_MAX@", str(LLDPAD_READ_MAX)) \
    .replace("@LLDPAD_LOG@", LLDPAD_LOG) \
    .replace("@DCBAPP_LOG@", DCBAPP_LOG)

# Each kind of item and the file save() writes its items to.
_FILES = {"procs": "procs.txt", "ip-link": "ip-link.txt",
          "tc-qdisc": "tc-qdisc.txt", "tc-filter": "tc-filter.txt",
          "cgroup": "cgroups.txt", "vlan": "vlan.txt",
          "trace": "tracing.txt", "lldpad": "lldpad.txt"}


@dataclass
class Item:
    """One piece of a guest's state: KIND (a key of _FILES), NAME (the
    device and direction, cgroup, VLAN device or trace instance)."""
    kind: str
    name: str
    text: str = ""
    error: str = ""


@dataclass
class GuestEvidence:
    guest: str
    items: list = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""       # the whole gathering failed (guest gone, agent)

    def of(self, kind):
        return [i for i in self.items if i.kind == kind]


def gather(guests: Iterable[Guest],
           timeout: float = 20.0) -> list[GuestEvidence]:
    """GuestEvidence of each guest, gathered in parallel; never raises."""
    guests = list(guests)
    if not guests:
        return []
    with concurrent.futures.ThreadPoolExecutor(len(guests)) as pool:
        return list(pool.map(lambda g: _gather_one(g, timeout), guests))


def _gather_one(guest, timeout):
    ev = GuestEvidence(guest.name)
    t0 = time.monotonic()
    try:
        if not guest.alive():
            ev.error = "guest not running"
            return ev
        # The agent directly, not guest.run(): the evidence is no command
        # of the test's, and stays out of its history.
        res = guest.agent.exec(["/bin/sh", "-c", _SCRIPT], timeout=timeout)
    except Exception as e:  # the report must not hide the failure
        ev.error = f"evidence not gathered: {e!r:.500}"
        return ev
    finally:
        ev.seconds = time.monotonic() - t0
    ev.items = _parse(res.stdout)
    if res.rc != 0 or res.stderr.strip():
        ev.error = (f"evidence script: rc {res.rc}, stderr "
                    f"{res.stderr.strip()[-500:]!r}")
    return ev


def _parse(out):
    items, cur = [], None
    for line in out.splitlines():
        if line.startswith("@@dcblab-item "):
            kind, _, name = line[len("@@dcblab-item "):].partition(" ")
            cur = Item(kind, name.strip())
            items.append(cur)
        elif line.startswith("@@dcblab-exit ") and cur is not None:
            cur.error = f"exit {line.split()[1]}"
        elif cur is not None:
            cur.text += line + "\n"
    return items


# --- the report's sections -------------------------------------------------

def sections(evidence: list[GuestEvidence],
             history: list[Command]) -> list[tuple[str, str]]:
    """[(title, text)] for a failed test's report: short, one line per
    thing where possible; save() keeps the full texts."""
    out = []

    def add(title, lines):
        if lines:
            out.append((title, "\n".join(lines)))

    add("priosend/priosink", _tools(evidence, history))
    add("per-PCP counters (tc -s filter)", _filters(evidence))
    add("net_prio / net_cls cgroups", _cgroups(evidence))
    add("VLAN QoS maps", _vlans(evidence))
    add("tracing", _tracing(evidence))
    add("lldpad", _lldpad(evidence))
    add("tc -s qdisc", [line for ev in evidence for i in ev.of("tc-qdisc")
                        for line in _qdiscs(ev.guest, i)])
    add("guest commands", _commands(history))
    add("evidence errors", _errors(evidence))
    return out


def _tools(evidence, history):
    lines = []
    for c in history:
        if not _runs_a_tool(c):
            continue
        lines.append(str(c))
        for name, text in (("stdout", c.stdout), ("stderr", c.stderr)):
            if text.strip():
                first, *rest = clip(text.strip(), 1500).splitlines()
                lines.append(f"  {name}: {first}")
                lines += [f"    {r}" for r in rest]
    for ev in evidence:
        for i in ev.of("procs"):
            running = i.text.strip().splitlines()[1:]
            if running:
                lines.append(f"{ev.guest}: still running:")
                lines += [f"  {p.strip()}" for p in running]
    return lines


def _runs_a_tool(command):
    """True if a word of the command line is a traffic tool: its argv[0],
    or the program of an `sh -c "... exec priosend ..."`."""
    return any(w.strip("'\"").rsplit("/", 1)[-1] in TOOLS
               for w in command.line.split())


_HEAD = re.compile(r"^filter .*?\bpref (\d+) (\S+)(.*)$")


def filter_counters(text: str) -> list[tuple]:
    """[(pref, kind, match, action, packets or None)] of `tc -s filter
    show` text, one entry per filter (not per chain/pref header)."""
    found, cur = [], None
    for line in text.splitlines():
        m = _HEAD.match(line)
        if m:
            cur = None
            if " handle " in m.group(3) or " fh " in m.group(3):
                cur = [int(m.group(1)), m.group(2), [], "", None]
                found.append(cur)
            continue
        if cur is None:
            continue
        s = line.strip()
        if line.startswith("  ") and not line.startswith("\t") and \
                s not in ("not_in_hw", "in_hw", "skip_hw", "skip_sw"):
            cur[2].append(s)
        elif s.startswith("action order") and not cur[3]:
            cur[3] = " ".join(s.split(":", 1)[1].split())
        elif s.startswith("Sent ") and cur[4] is None:
            cur[4] = int(s.split()[3])
    return [(p, k, " ".join(keys), act, n) for p, k, keys, act, n in found]


def _filters(evidence):
    lines = []
    for ev in evidence:
        for i in ev.of("tc-filter"):
            rows = filter_counters(i.text)
            if not rows and not i.error and i.name.endswith(" ingress"):
                lines.append(f"{ev.guest} {i.name}: no filters")
            for pref, kind, match, action, n in rows:
                count = "no counter" if n is None else f"{n} pkt"
                what = " ".join(w for w in (kind, match) if w)
                lines.append(f"{ev.guest} {i.name} pref {pref} {what}: "
                             f"{count} ({action or 'no action'})")
    read = [ev.guest for ev in evidence if not ev.error]
    if not lines and read:
        lines.append(f"no ingress or clsact qdisc on {', '.join(read)}")
    return lines


_QDISC = re.compile(r"^qdisc (\S+) (\S+) dev (\S+) (root|parent \S+)"
                    r"(?: refcnt \d+)?(.*)$")
_SENT = re.compile(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), "
                   r"overlimits (\d+) requeues (\d+)\)")


def _qdiscs(guest, item):
    """One line per qdisc of `tc -s qdisc` text (the text itself if it
    does not parse)."""
    lines, cur = [], None
    for row in item.text.splitlines():
        m = _QDISC.match(row)
        if m:
            kind, handle, dev, where, rest = m.groups()
            if kind == "noqueue":     # counts nothing, ever
                cur = None
                continue
            # pfifo_fast's priomap is the same fixed table on every queue.
            rest = "" if kind == "pfifo_fast" else " ".join(rest.split())
            cur = " ".join(w for w in (
                guest, dev, kind, handle if handle != "0:" else "",
                f"({where})", rest) if w)
            continue
        s = _SENT.search(row)
        if s and cur:
            _, pkts, dropped, over, requeues = s.groups()
            extra = "".join(f", {name} {v}" for name, v in
                            (("overlimits", over), ("requeues", requeues))
                            if v != "0")
            lines.append(f"{cur}: {pkts} pkt, dropped {dropped}{extra}")
            cur = None
    if not lines:
        return [f"--- {guest} ---", item.text.rstrip()]
    return lines + ([f"{guest} [{item.error}]"] if item.error else [])


def _cgroups(evidence):
    lines = []
    for ev in evidence:
        for i in ev.of("cgroup"):
            fields, zero, mapped = {}, [], []
            for row in i.text.splitlines():
                key, sep, value = row.partition(": ")
                if sep and key in ("procs", "prioidx", "classid"):
                    fields[key] = value.strip()
                elif len(row.split()) == 2:
                    dev, prio = row.split()
                    (zero if prio == "0" else mapped).append((dev, prio))
            parts = []
            if "prioidx" in fields:
                parts.append(f"prioidx {fields['prioidx']}")
                if mapped:
                    parts.append("ifpriomap " + ", ".join(
                        f"{d} {p}" for d, p in mapped) + (
                        f" (0: {' '.join(d for d, _ in zero)})"
                        if zero else ""))
                else:
                    parts.append("ifpriomap all 0")
            if "classid" in fields:
                parts.append(f"classid {_classid(fields['classid'])}")
            if fields.get("procs"):
                parts.append(f"procs {fields['procs']}")
            if i.error:
                parts.append(f"[{i.error}]")
            lines.append(f"{ev.guest} {i.name}: {', '.join(parts)}")
    return lines


def _classid(text):
    try:
        c = int(text)
    except ValueError:
        return text
    return f"{c:#x} ({c >> 16:x}:{c & 0xffff:x})" if c else "0"


def _vlans(evidence):
    lines = []
    for ev in evidence:
        for i in ev.of("vlan"):
            if i.name == "config":
                continue
            vid = re.search(r"VID: (\d+)", i.text)
            dev = re.search(r"^Device: (\S+)", i.text, re.M)
            maps = {}
            for d in ("INGRESS", "EGRESS"):
                m = re.search(rf"{d} priority mappings:(.*)$", i.text, re.M)
                maps[d] = " ".join(m.group(1).split()) if m else "?"
            vid = vid.group(1) if vid else "?"
            dev = dev.group(1) if dev else "?"
            lines.append(f"{ev.guest} {i.name} (vid {vid} on {dev}): "
                         f"ingress {maps['INGRESS']}; egress {maps['EGRESS']}"
                         + (f" [{i.error}]" if i.error else ""))
    return lines


def _tracing(evidence):
    lines = []
    for ev in evidence:
        for i in ev.of("trace"):
            f = {}
            events, hits = [], []
            for row in i.text.splitlines():
                key, _, value = row.partition(": ")
                if key == "event":
                    events.append(value.replace(" filter: none", "")
                                  .replace(" filter: ", " if "))
                elif key == "hits":
                    hits.append(value.replace(": ", " ", 1))
                elif key in ("tracing_on", "events enabled", "entries",
                             "overrun"):
                    f[key] = value
            name = "top level" if i.name.startswith("/") else \
                f"instance {i.name}"
            if not events and f.get("entries", "0") == "0" and \
                    i.name.startswith("/"):
                continue          # tracing never used at the top level
            lines.append(
                f"{ev.guest} {name}: tracing_on {f.get('tracing_on', '?')}, "
                f"{f.get('events enabled', '?')} event(s): "
                f"{'; '.join(events) or '-'}; entries {f.get('entries', '?')}"
                f" overrun {f.get('overrun', '?')}"
                + (f"; hits {', '.join(hits)}" if hits else ""))
    return lines


def _lldpad(evidence):
    """Per guest where lldpad (or dcbapp-netprio) ran: running or not,
    its log's last lines."""
    lines = []
    for ev in evidence:
        for prog, log in (("lldpad", LLDPAD_LOG),
                          ("dcbapp-netprio", DCBAPP_LOG)):
            name = "status" if prog == "lldpad" else f"{prog} status"
            status = [i for i in ev.of("lldpad") if i.name == name]
            logs = [i for i in ev.of("lldpad") if i.name == log]
            if not status and not logs:
                continue
            pid = status[0].text.strip() if status else ""
            state = (f"running (pid {pid})" if pid.isdigit()
                     else "not running")
            if not logs:
                lines.append(f"{ev.guest}: {prog} {state}")
            for i in logs:
                rows = i.text.rstrip("\n").splitlines()
                shown = rows[-LLDPAD_SHOWN:]
                lines.append(f"{ev.guest}: {prog} {state}; {i.name}: "
                             + (f"last {len(shown)} lines" if shown
                                else "empty")
                             + (f" [{i.error}]" if i.error else ""))
                lines += [f"  {r}" for r in shown]
    return lines


def _commands(history):
    """One line per command; a run of the same command with the same
    outcome (a readiness poll) is one line with its count."""
    lines, prev, count = [], None, 0

    def flush():
        if prev is not None:
            lines.append(f"{prev}" + (f"  (x{count})" if count > 1 else ""))
            if prev.rc not in (None, 0) and prev.stderr.strip():
                lines.append(_indent(clip(prev.stderr.rstrip(), 600), 4))

    def same(a, b):
        return b is not None and a.outcome.startswith("-> rc") and \
            (a.guest, a.line, a.rc, a.stdout, a.stderr) == \
            (b.guest, b.line, b.rc, b.stdout, b.stderr)

    for c in history:
        if same(c, prev):
            count += 1
            continue
        flush()
        prev, count = c, 1
    flush()
    return lines


def _errors(evidence):
    lines = []
    for ev in evidence:
        if ev.error:
            lines.append(f"{ev.guest}: {ev.error}")
        lines += [f"{ev.guest} {i.kind} {i.name}: {i.error}"
                  for i in ev.items if i.error]
    return lines


def _indent(text, n):
    return "\n".join(" " * n + line for line in text.splitlines())


# --- the artefact folder ---------------------------------------------------

def artefact_dir(root: str | os.PathLike, nodeid: str) -> Path:
    """ROOT/<nodeid with every run of characters outside [A-Za-z0-9._-]
    as one "_">: tests/test_a.py::test_b[x] -> tests_test_a.py_test_b_x."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("_")
    return Path(root) / (name[:200] or "unnamed")


def save(folder, guests, evidence, history, extra=()):
    """Write everything to FOLDER (made if need be); returns the paths
    written, relative to FOLDER:

    commands.txt  every guest command of the test with its output
    GUEST/        console.log, qemu.log and one file per evidence kind
    NAME          each (NAME, path) of EXTRA copied (a lab-wide log)"""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []

    def put(rel, text):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
        written.append(rel)

    def copy(rel, src):
        try:
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, folder / rel)
            written.append(rel)
        except OSError as e:
            put(rel + ".missing", f"{src}: {e}\n")

    put("commands.txt", _commands_file(history))
    for g in guests:
        m = g.machine
        copy(f"{g.name}/console.log", m.console.path)
        copy(f"{g.name}/qemu.log", m.log_path())
    for ev in evidence:
        put(f"{ev.guest}/evidence.txt", f"gathered in {ev.seconds:.2f} s\n"
            + "".join(f"{e}\n" for e in _errors([ev])))
        for kind, fname in _FILES.items():
            items = ev.of(kind)
            if items:
                put(f"{ev.guest}/{fname}", "".join(_item_text(i)
                                                   for i in items))
    for name, src in extra:
        if Path(src).exists():
            copy(name, src)
    return written


def _item_text(i):
    head = f"=== {i.kind} {i.name}".rstrip() + " ==="
    err = f"[{i.error}]\n" if i.error else ""
    return f"{head}\n{i.text}{err}\n"


def _commands_file(history):
    out = []
    for c in history:
        stamp = time.strftime("%H:%M:%S", time.localtime(c.at)) + \
            f".{int(c.at * 1000) % 1000:03d}"
        out.append(f"{stamp} {c}")
        for name, text in (("stdout", c.stdout), ("stderr", c.stderr)):
            if text:
                out.append(f"  --- {name} ---")
                out.append(_indent(text.rstrip("\n"), 4))
    return "\n".join(out) + "\n" if out else "(no guest commands)\n"


# --- a lab that failed to start ---------------------------------------------

class RunLogs:
    """Every log (``*.log``, ``*.out``) under a starting lab's run
    directory, opened by a thread as it appears and held open until
    close(): read() returns what each held, even after the keeper removed
    the directory. A context manager: watching from enter to exit."""

    SUFFIXES = (".log", ".out")

    def __init__(self, rundir, interval=0.02):
        self.rundir = Path(rundir)
        self.interval = interval
        self._files = {}          # path relative to rundir -> open file
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name=f"runlogs {self.rundir.name}")
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        """Stop opening new files (the open ones stay readable)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._scan()     # a last look: whatever appeared since

    def _watch(self):
        while not self._stop.wait(self.interval):
            self._scan()

    def _scan(self):
        for d, _, names in os.walk(self.rundir):
            for name in names:
                if not name.endswith(self.SUFFIXES):
                    continue
                rel = os.path.relpath(os.path.join(d, name), self.rundir)
                if rel in self._files:
                    continue
                try:
                    self._files[rel] = open(os.path.join(d, name), "rb")
                except OSError:
                    pass        # removed meanwhile, or not a file

    def read(self):
        """{relative path: bytes} of every log seen, whole."""
        out = {}
        for rel, f in sorted(self._files.items()):
            try:
                out[rel] = os.pread(f.fileno(), os.fstat(f.fileno()).st_size,
                                    0)
            except OSError as e:
                out[rel] = f"(unreadable: {e})\n".encode()
        return out

    def close(self):
        self.stop()
        for f in self._files.values():
            f.close()
        self._files.clear()


def _saved_as(rel, lab):
    """Where a run directory's log goes in an artefact folder: as save()
    puts a failed test's (GUEST/console.log, GUEST/qemu.log,
    LAB-keeper.log); libvirt's QEMU log of GUEST as GUEST/qemu.log too;
    anything else under its own path."""
    parts = Path(rel).parts
    if parts == ("keeper.log",):
        return f"{lab}-keeper.log"
    if len(parts) == 2 and parts[1] in ("console.log", "qemu.log"):
        return rel
    if parts[-3:-1] == ("log", "qemu") and len(parts) >= 3:
        return f"{Path(parts[-1]).stem}/qemu.log"
    return rel


def save_logs(folder, lab, logs, history=()):
    """Write a failed start's evidence to FOLDER: every log LOGS
    ({path in the run directory: bytes}, RunLogs.read()) of lab LAB, and
    commands.txt (the guest commands the tests ran, if any); returns the
    paths written, relative to FOLDER, and the guests' console texts."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written, consoles = [], {}
    for rel, data in logs.items():
        dest = _saved_as(rel, lab)
        if dest in written:          # two logs for one place: keep both
            dest = rel
        (folder / dest).parent.mkdir(parents=True, exist_ok=True)
        (folder / dest).write_bytes(data)
        written.append(dest)
        if Path(dest).name == "console.log" and len(Path(dest).parts) == 2:
            consoles[Path(dest).parts[0]] = data.decode(errors="replace")
    (folder / "commands.txt").write_text(_commands_file(list(history)))
    written.append("commands.txt")
    return sorted(written), consoles
