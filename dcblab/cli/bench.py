"""`dcblab bench`: measured figures, printed as a table (never asserted)."""

import contextlib
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..build import forget_check_stamps
from ..build.variants import MEASURED, kernel_without, patch_named
from ..backends import QemuVm, VmSpec, choose_accel
from ..core import paths, proc
from ..core.errors import DcblabError, UsageError
from ..lab import Lab, leftovers
from ..scenarios import app_chain, datapath, negotiate, two_cgroups_at_once
from ..scenarios.roce import ERROR_COUNTERS as ERRS
from ..scenarios.soak import (DEFAULT_BUDGET_S, DEFAULT_CLEAN, DEFAULT_KILLED,
                              soak)
from ..testing import LabHandle, send
from ..testing.dcb import fresh_lldpad
from ..topology import load
from .common import need_images, say, sigterm_as_exit
from .soak import cycle_line, header, plan_line

__all__ = ["add_parsers", "bench", "topology_with_cpus"]

# Where `make test`'s output turns from the checks to pytest: make echoes
# the recipe line that runs it.
_PYTEST_STARTS = re.compile(r"-m pytest\b|test session starts")
_PYTEST_SUMMARY = re.compile(r"^=+ (.*\b(passed|failed|error|errors|skipped)"
                             r"\b.*) =+$")
_TABLE_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


class BenchError(DcblabError):
    pass


def _cold_build_seconds():
    with tempfile.TemporaryDirectory(prefix="bench-kernel-",
                                     dir=paths.build_dir()) as d:
        env = dict(os.environ, BUILD=d)
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "dcblab.build", "kernel"],
                           cwd=paths.ROOT, env=env, capture_output=True,
                           text=True)
        if r.returncode != 0:
            raise BenchError(f"cold build failed:\n{r.stderr}")
        return time.monotonic() - t0


def _one_vm_boots(n, accel):
    inits, guests, readies = [], [], []
    for i in range(n):
        say(f"bench: single-VM boot {i + 1}/{n}")
        with tempfile.TemporaryDirectory(prefix="dcblab-bench-") as d:
            vm = QemuVm(VmSpec(f"bench{i}", paths.bzimage(),
                               paths.initramfs(), accel=accel), d)
            with vm:
                vm.start()
                t_init, guest_init = vm.wait_init(timeout=60)
                inits.append(t_init)
                guests.append(guest_init)
                readies.append(vm.wait_ready(timeout=60))
    return inits, guests, readies


def _first_cycle(lab, args):
    """Figures measured once, on the first lab up: exec, memory."""
    h1 = lab.h1
    execs = []
    for _ in range(args.execs):
        t = time.monotonic()
        h1.run(["true"])
        execs.append(time.monotonic() - t)
    mem = [proc.meminfo_used_kib(g.read("/proc/meminfo"))
           for g in lab.guests.values()]
    rss = [proc.rss_kib(m.pid) for m in lab.lab.machines.values()]
    return execs, mem, rss, _cli_execs(lab.name, args.cli_execs)


def _cli_execs(name, n):
    """Wall times of `dcblab exec h1 -- true` from a shell, and of a bare
    `python3 -c pass` measured in turn (the interpreter's own start)."""
    dcblab = [sys.executable, str(paths.ROOT / "bin" / "dcblab"), "exec",
              "--name", name, "h1", "--", "true"]
    bare = [sys.executable, "-c", "pass"]
    cli, py = [], []
    for _ in range(n):
        for argv, times in ((dcblab, cli), (bare, py)):
            t = time.monotonic()
            subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
            times.append(time.monotonic() - t)
    return cli, py


def _cycles(topo, args, accel):
    """Two-VM up/down cycles of the shipped topology; rows."""
    med = statistics.median
    ups, leaks, cycle_s = [], 0, []
    execs, cli, py = [], [], []
    for i in range(args.cycles):
        say(f"bench: two-VM up/down cycle {i + 1}/{args.cycles}")
        lab = Lab(topo, f"bench-{os.getpid()}")
        t0 = time.monotonic()
        try:
            ups.append(lab.up(owner_pid=os.getpid(), accel=accel,
                              cold=True)["total"])
            if i == 0:
                execs, mem, rss, (cli, py) = _first_cycle(LabHandle(lab),
                                                          args)
        finally:
            lab.down()
        cycle_s.append(time.monotonic() - t0)
        left = leftovers(lab.name, lab.run_id)
        if left:
            leaks += 1
            say(f"bench: cycle {i + 1} left {', '.join(left)}")
    host = topo.hosts[0]
    rows = [
        ("up -> both ready (two-hosts)", f"{med(ups):.2f} s",
         f"median of {len(ups)} cold ups (--cold): wire, 2 boots, agents, "
         "baseline, lldpad")]
    if execs:
        rows.append(("exec round trip", f"{med(execs) * 1000:.1f} ms",
                     f"median of {len(execs)} guest-exec of `true` on h1, "
                     "in-process, through the lab's keeper (goal <= 20 ms)"))
    if cli:
        rows.append(("`dcblab exec h1 -- true`", f"{med(cli) * 1000:.0f} ms",
                     f"median of {len(cli)} from a shell: interpreter, "
                     "keeper, dcblab-run, output files (goal <= 150 ms)"))
        rows.append(("bare `python3 -c pass`", f"{med(py) * 1000:.0f} ms",
                     f"median of {len(py)}, timed in turn with the above"))
    rows += [
        ("guest RAM configured", f"{host.memory_mib} MiB", "per VM, topology"),
        ("guest RAM in use", f"{max(mem) // 1024} MiB",
         "max over VMs of MemTotal - MemAvailable after baseline"),
        ("QEMU RSS on the host", f"{max(rss) // 1024} MiB",
         "max over VMs, VmRSS after baseline"),
        ("up/down cycle", f"{med(cycle_s):.2f} s",
         f"median of {len(cycle_s)} cycles"),
        ("cycles that leaked", f"{leaks}",
         f"of {args.cycles}: qemu, netns or run dir left after down"),
    ]
    return rows


# --- the two-cgroup rate per vCPU count --------------------------------------

def _backend_cycle(topo, backend, accel, execs):
    """One two-hosts lab on BACKEND: up -> ready, exec round trips, the
    destroy of one guest (libvirt) and down; seconds."""
    lab = Lab(topo, f"bench-{backend[:4]}-{os.getpid() % 10000}",
              backend=backend)
    fig = {}
    try:
        # Cold: the backends' boots compared (both restore snapshots;
        # _snapshot_rows has those).
        t = lab.up(owner_pid=os.getpid(), accel=accel, cold=True)
        fig["up"], fig["open"] = t["total"], t.get("backend_open", 0.0)
        h1 = LabHandle(lab).h1
        times = []
        for _ in range(execs):
            t0 = time.monotonic()
            h1.run(["true"])
            times.append(time.monotonic() - t0)
        fig["exec"] = statistics.median(times)
        fig["rss"] = max(proc.rss_kib(m.pid) for m in lab.machines.values())
        uri = lab.state.get("backend_info", {}).get("uri")
        if uri:
            fig["daemon_rss"] = proc.rss_kib(
                lab.state["backend_info"]["daemon_pid"])
            import libvirt
            conn = libvirt.open(uri)
            try:
                dom = conn.lookupByName(topo.hosts[-1].name)
                t0 = time.monotonic()
                dom.destroy()
                fig["destroy"] = time.monotonic() - t0
            finally:
                conn.close()
    finally:
        t0 = time.monotonic()
        lab.down()
        fig["down"] = time.monotonic() - t0
    left = leftovers(lab.name, lab.run_id)
    if left:
        raise BenchError(f"{backend} lab left {', '.join(left)}")
    return fig


def _backend_rows(topo, args, accel):
    """The qemu and libvirt backends side by side: cycles alternate, so
    both see the same machine."""
    med = statistics.median
    figs = {"qemu": [], "libvirt": []}
    for i in range(args.backend_cycles):
        for backend in figs:
            say(f"bench: {backend} backend up/down {i + 1}/"
                f"{args.backend_cycles}")
            figs[backend].append(_backend_cycle(topo, backend, accel,
                                                args.backend_execs))

    def m(backend, key):
        return med(f[key] for f in figs[backend])
    n = args.backend_cycles
    q_up, l_up = m("qemu", "up"), m("libvirt", "up")
    q_ex, l_ex = m("qemu", "exec"), m("libvirt", "exec")
    q_dn, l_dn = m("qemu", "down"), m("libvirt", "down")
    return [
        ("qemu backend: up -> all ready", f"{q_up:.2f} s",
         f"two-hosts, median of {n}, alternating with libvirt"),
        ("libvirt backend: up -> all ready", f"{l_up:.2f} s",
         f"median of {n}; {l_up / q_up:.2f}x the qemu backend"),
        ("  of which libvirtd start", f"{m('libvirt', 'open'):.2f} s",
         "daemon in the lab's netns until its socket answers"),
        ("qemu backend: exec round trip", f"{q_ex * 1000:.1f} ms",
         f"median over {n} labs of the median of {args.backend_execs} "
         "`true` through the keeper"),
        ("libvirt backend: exec round trip", f"{l_ex * 1000:.1f} ms",
         f"same; {l_ex / q_ex:.2f}x (virDomainQemuAgentCommand)"),
        ("libvirt: destroy one domain", f"{m('libvirt', 'destroy'):.2f} s",
         f"virDomainDestroy of {topo.hosts[-1].name}, median of {n}"),
        ("qemu backend: down", f"{q_dn:.2f} s",
         "guests stopped, netns and run dir removed"),
        ("libvirt backend: down", f"{l_dn:.2f} s",
         f"{l_dn / q_dn:.2f}x: domains destroyed, libvirtd stopped, netns "
         "and run dir removed"),
        ("QEMU RSS, qemu / libvirt", f"{m('qemu', 'rss') // 1024}/"
         f"{m('libvirt', 'rss') // 1024} MiB", "max over the two guests"),
        ("libvirtd RSS", f"{m('libvirt', 'daemon_rss') // 1024} MiB",
         "the lab's private daemon, with two domains"),
    ]


def topology_with_cpus(text, cpus, path="topology"):
    """TOML text of a topology with each host's ``cpus`` set from cpus
    ({host: n}): the key is replaced (or added) in the host's own table,
    everything else, comments included, is left as it was."""
    out, host, header, seen = [], None, 0, set()

    def close_table():
        # A host table without a cpus key gets one under its header.
        if host in cpus and host not in seen:
            out.insert(header + 1, f"cpus = {cpus[host]}")
            seen.add(host)

    for line in text.splitlines():
        m = _TABLE_HEADER.match(line)
        if m:
            close_table()
            parts = [p.strip().strip('"') for p in m.group(1).split(".")]
            host = parts[1] if len(parts) == 2 and parts[0] == "hosts" \
                and not line.lstrip().startswith("[[") else None
            header = len(out)
        elif host in cpus and re.match(r"\s*cpus\s*=", line):
            line = f"cpus = {cpus[host]}"
            seen.add(host)
        out.append(line)
    close_table()
    unknown = sorted(set(cpus) - seen)
    if unknown:
        raise UsageError(f"{path}: no [hosts.{unknown[0]}] table to set "
                         "cpus in")
    return "\n".join(out) + "\n"


def _vcpu_configs(topo, specs):
    """[{host: cpus}] from --vcpus words: "2" (every host) or "2,1" (one
    count per host, in the topology's order); the shipped counts are
    added when they are not among them."""
    names = [h.name for h in topo.hosts]
    configs = []
    for spec in specs:
        try:
            counts = [int(x) for x in spec.split(",")]
        except ValueError:
            counts = []
        if len(counts) == 1:
            counts *= len(names)
        if len(counts) != len(names) or not all(1 <= c <= 8 for c in counts):
            raise UsageError(f"--vcpus {spec!r}: want N or one count per host "
                             f"({','.join(names)}), each 1..8")
        configs.append(dict(zip(names, counts)))
    shipped = {h.name: h.cpus for h in topo.hosts}
    if shipped not in configs:
        configs.append(shipped)
    return configs, shipped


def _label(cpus):
    return ",".join(str(n) for n in cpus.values())


def _derived_topology(topo, cpus, workdir):
    """The shipped topology with these vCPU counts, as a file (a lab copies
    its topology file) in workdir, loaded and checked."""
    src = Path(topo.path)
    counts = _label(cpus).replace(",", "-")
    tmp = Path(workdir) / f"{src.stem}-vcpus-{counts}{src.suffix}"
    tmp.write_text(topology_with_cpus(src.read_text(), cpus, str(src)))
    derived = load(tmp)
    got = {h.name: h.cpus for h in derived.hosts}
    if got != cpus:
        raise BenchError(f"{tmp}: derived topology has vCPUs {got}, "
                         f"wanted {cpus}")
    return derived


@contextlib.contextmanager
def _booted(topo, accel, kernel=None):
    """A lab of topo up (on kernel, a bzImage, if given: DCBLAB_KERNEL for
    its keeper, checked in every guest), as a LabHandle; down after."""
    lab = Lab(topo, f"bench-rate-{os.getpid()}")
    try:
        with paths.kernel_env(kernel):
            lab.up(owner_pid=os.getpid(), accel=accel)
            handle = LabHandle(lab)
            if kernel:
                _check_booted(handle, kernel)
            yield handle
    finally:
        lab.down()


def _rate_run(topo, args, accel):
    """One lab up with topo, one two-cgroup run, down: (result, number of
    other QEMU processes on the host while it ran)."""
    with _booted(topo, accel) as handle:
        want = {h.name: h.cpus for h in topo.hosts}
        online = {n: int(g.run(["nproc"]).stdout)
                  for n, g in handle.guests.items()}
        if online != want:
            raise BenchError(f"lab with vCPUs {want}: guests report {online} "
                             "CPUs online")
        ours = {m.pid for m in handle.lab.machines.values()}
        others = len(set(proc.pids_with_tag("qemu-system")) - ours)
        result = two_cgroups_at_once(handle, per_flow=args.frames // 2)
        others = max(others, len(set(proc.pids_with_tag("qemu-system"))
                                 - ours))
    return result, others


def _sender_rate(handle, result, vlan, frames):
    """Frames/s the scenario's sender reaches alone, from its first flow's
    cgroup (its priomap applies) through the class queues: sent to an
    address of the VLAN whose neighbour entry names a MAC nobody has, so
    the receiver's NIC (QEMU's RX filter) drops every frame and its kernel
    does no work."""
    tx = handle.guest(result.sender)
    dst = handle.topology.address(result.receiver, vlan)
    ghost = dst.rsplit(".", 1)[0] + ".250"
    tx.run(["ip", "neigh", "replace", ghost, "lladdr", "02:dc:b1:ab:00:fa",
            "dev", result.vlan_dev, "nud", "permanent"])
    got = send(tx, ghost, count=frames, flow=9,
               cgroup=result.flows[0].cgroup)
    return got["sent"] / got["elapsed_s"]


def _check_booted(handle, kernel):
    """BenchError unless every guest runs that bzImage's build."""
    wrong = handle.not_running(kernel)
    if wrong:
        name, running = next(iter(wrong.items()))
        raise BenchError(f"{name} runs {running!r}, not {kernel}")


def _rate_rows(topo, args, accel):
    """The two-cgroup rate and loss per vCPU setting. Each round boots
    every setting once, in turn, so load from other work on the host falls
    on all settings alike rather than on whichever ran last."""
    configs, shipped = _vcpu_configs(topo, args.vcpus)
    hosts = ",".join(h.name for h in topo.hosts)
    runs = {_label(c): [] for c in configs}
    others = []
    with tempfile.TemporaryDirectory(prefix="dcblab-bench-topo-") as d:
        derived = {_label(c): _derived_topology(topo, c, d) for c in configs}
        for i in range(args.rate_runs):
            for label, t in derived.items():
                say(f"bench: vCPUs {hosts}={label}: {args.frames} frames "
                    f"from two cgroups, round {i + 1}/{args.rate_runs}")
                result, n = _rate_run(t, args, accel)
                runs[label].append(result)
                others.append(n)
    rows = []
    for cpus in configs:
        results = runs[_label(cpus)]
        rates = [r.rate for r in results]
        lost = [r.lost for r in results]
        sent = sum(r.sent for r in results)
        mark = " (shipped)" if cpus == shipped else ""
        rows.append(
            (f"frames/s, vCPUs {hosts}={_label(cpus)}{mark}",
             f"{statistics.median(rates):.0f}",
             f"median of {len(rates)} runs ({min(rates):.0f}.."
             f"{max(rates):.0f}), {args.frames} frames each: classified / "
             "(sink start to last frame, or send time if longer)"))
        misc = sum(f.misclassified for r in results for f in r.flows)
        rows.append(
            ("  lost", f"{sum(lost)}",
             f"of {sent} sent ({sum(lost) / sent:.2%}; per run "
             f"{', '.join(map(str, lost))}); {misc} misclassified"))
        worst = max(results, key=lambda r: r.lost)
        if worst.lost:
            rows.append(("  where (worst run)", "", worst.loss_reason()))
    rows.append(("  other QEMUs during these runs",
                 f"{min(others)}..{max(others)}",
                 "processes of other labs, sampled before and after each "
                 "run"))
    return rows



def _datapath_run(handle, frames, pktgen_first):
    """In one two-hosts lab: the two-cgroup run (priosend x 2 -> priosink)
    and pktgen on the same link, h1's CPUs each with a thread, in the order
    given; then one priosend alone (_sender_rate). (tools' result,
    pktgen's result, the sender's frames/s alone)."""
    sender, receiver, vlan = "h1", "h2", 100
    tx, rx = handle.guest(sender), handle.guest(receiver)
    tx_nic = handle.topology.host(sender).nics[0].name
    rx_nic = handle.topology.host(receiver).nics[0].name
    threads = handle.topology.host(sender).cpus

    def kernel():
        # The two-cgroup run's VLAN address and the frames' length; the
        # same count of frames in all as the tools send.
        return datapath.pktgen(
            tx, rx, tx_dev=tx_nic, rx_dev=rx_nic,
            dst=str(handle.topology.address(receiver, vlan)),
            dst_mac=rx.read(f"/sys/class/net/{rx_nic}/address").strip(),
            count=frames // threads, vlan=vlan, pcp=5, threads=threads)

    def tools():
        # No tracepoint: evidence the frames/s rows carry, not the tools.
        return two_cgroups_at_once(handle, per_flow=frames // 2, vlan=vlan,
                                   sender=sender, receiver=receiver,
                                   trace=False)

    if pktgen_first:
        gen = kernel()
        result = tools()
    else:
        result = tools()
        gen = kernel()
    return result, gen, _sender_rate(handle, result, vlan, frames)


def _datapath_rows(topo, args, accel):
    """Classified frames/s of the tools against pktgen's frames/s on the
    same link, in the same lab, each run's order alternated."""
    ratios, tools, gens, sent, senders = [], [], [], [], []
    for i in range(args.datapath_runs):
        say(f"bench: data path, round {i + 1}/{args.datapath_runs}: "
            f"{args.frames} frames by priosend and by pktgen, h1 -> h2")
        with _booted(topo, accel) as handle:
            result, gen, alone = _datapath_run(handle, args.frames,
                                               pktgen_first=i % 2 == 1)
        senders.append(alone)
        tools.append(result.rate)
        gens.append(gen.rate)
        sent.append(gen.sent_rate)
        ratios.append(result.rate / gen.rate if gen.rate else 0.0)
    med = statistics.median
    n = len(ratios)
    return [
        ("data path: tools, classified/s", f"{med(tools):.0f}",
         f"two priosend -> priosink, median of {n} ({min(tools):.0f}.."
         f"{max(tools):.0f}), as the frames/s rows"),
        ("  pktgen, received/s", f"{med(gens):.0f}",
         f"same lab, same link and frames (VLAN 100, PCP 5, "
         f"{datapath.frame_len(64)} B), one kernel thread per h1 CPU; h2's "
         f"rx_packets over pktgen's run ({min(gens):.0f}..{max(gens):.0f}; "
         f"pktgen handed the driver {med(sent):.0f}/s)"),
        ("  priosend alone, sent/s", f"{med(senders):.0f}",
         f"one priosend, h2's NIC dropping its frames (a MAC nobody has): "
         f"the sender's own bound ({min(senders):.0f}..{max(senders):.0f})"),
        ("  tools / pktgen", f"{med(ratios):.2f}",
         f"median of {n} per-lab ratios ({min(ratios):.2f}.."
         f"{max(ratios):.2f}); goal >= 0.80"),
    ]

# --- what each patch costs: the series against the series minus it --------

def _patch_cost_rows(topo, args, accel):
    """Classified frames/s on the whole series and on the series without
    each patch of args.without, interleaved round by round (load from other
    work falls on all kernels alike), and in the same labs the frames/s of
    h1's sender alone; the ratio per round, whole series over the series
    without the patch."""
    whole_series = "whole series"
    vlan = 100
    kernels = {whole_series: None}
    rows = []
    for prefix in args.without:
        name = patch_named(prefix)
        say(f"bench: the lab kernel without {name} (a cold build the "
            "first time: minutes) ...")
        bzimage, took = kernel_without(name, progress=say)
        kernels[f"without {prefix}"] = bzimage
        rows.append((f"kernel without {prefix}", f"{took:.0f} s",
                     f"{name}: series minus it, lab flavour, own BUILD "
                     "(BUILD/variants/); seconds of this run's build step, "
                     "near 0 once built"))
    rates = {k: [] for k in kernels}
    alone = {k: [] for k in kernels}
    labels = list(kernels)
    for i in range(args.patch_runs):
        # Each round starts with another kernel: no kernel always runs
        # first (or right after the same one).
        for label in labels[i % len(labels):] + labels[:i % len(labels)]:
            kernel = kernels[label]
            say(f"bench: {label}: {args.frames} frames from two cgroups, "
                f"round {i + 1}/{args.patch_runs}")
            with _booted(topo, accel, kernel) as handle:
                result = two_cgroups_at_once(
                    handle, per_flow=args.frames // 2, vlan=vlan,
                    trace=False)
                if any(f.misclassified for f in result.flows):
                    raise BenchError(f"{label}: frames misclassified: the "
                                     "kernel does not classify as the "
                                     "series")
                rates[label].append(result.rate)
                alone[label].append(_sender_rate(handle, result, vlan,
                                                 args.frames))
    for what, runs, how in (
            ("frames/s", rates, "two cgroups to h2, classified"),
            ("sender alone, frames/s", alone, "one cgroup's priosend, "
             "h2's NIC dropping them")):
        whole = runs[whole_series]
        for label, got in runs.items():
            rows.append((f"{what}, {label}", f"{statistics.median(got):.0f}",
                         f"median of {len(got)} runs ({min(got):.0f}.."
                         f"{max(got):.0f}), {args.frames} frames each, "
                         f"{how}, tracepoint off"))
            if label == whole_series:
                continue
            ratios = [w / o for w, o in zip(whole, got)]
            rows.append((f"  ratio whole / {label}",
                         f"{statistics.median(ratios):.3f}",
                         f"median of the rounds' ratios ({min(ratios):.3f}"
                         f"..{max(ratios):.3f}); goal >= 0.99"))
    return rows


# --- make test, warm and with the check stamps forgotten ---------------------

def _make_test():
    """`make test` in the tree: (seconds before pytest, seconds of pytest,
    pytest's summary line, exit code)."""
    t0 = time.monotonic()
    t_pytest, summary = None, ""
    p = subprocess.Popen(["make", "-C", str(paths.ROOT), "test"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, bufsize=1)
    with p:
        for line in p.stdout:
            if t_pytest is None and _PYTEST_STARTS.search(line):
                t_pytest = time.monotonic()
            m = _PYTEST_SUMMARY.match(line.strip())
            if m:
                summary = m.group(1)
    t_end = time.monotonic()
    if t_pytest is None:
        t_pytest = t_end
    return t_pytest - t0, t_end - t_pytest, summary, p.returncode


def _suite_rows():
    """`make test` twice: first with the checkpatch/series stamps forgotten
    (the checks run), then warm (that run left the stamps and the kernel is
    built: nothing to rebuild or re-check)."""
    rows = []
    runs = (("cold checks make test", "checkpatch/series stamps forgotten "
             "first", "checks run again"),
            ("warm make test", "nothing to rebuild or re-check",
             "make deps, kernel, image, tools-check, checks skipped"))
    forget_check_stamps()
    for name, how, before_how in runs:
        say(f"bench: {name} ...")
        before, pytest_s, summary, rc = _make_test()
        status = f"; exit {rc}" if rc else ""
        rows += [
            (name, f"{before + pytest_s:.1f} s", f"{how}{status}"),
            ("  before pytest", f"{before:.1f} s", before_how),
            ("  pytest", f"{pytest_s:.1f} s", summary or "no summary line"),
        ]
    rows[-3] = (rows[-3][0], rows[-3][1],
                rows[-3][2] + " (goal <= 180 s with everything in it)")
    # The warm run's time per test file (the plugin writes it).
    try:
        files = json.loads(paths.suite_times().read_text())
    except (OSError, ValueError):
        return rows
    ranked = sorted(files["files"].items(), key=lambda kv: -kv[1])
    rows += [(f"  {f.split('/')[-1]}", f"{t:.1f} s",
              "warm run, set-up + call + tear-down of its tests")
             for f, t in ranked[:10]]
    rest = sum(t for _, t in ranked[10:])
    rows.append((f"  {len(ranked) - 10} other files", f"{rest:.1f} s",
                 "warm run"))
    return rows


def _dcbx_rows(topo, args, accel):
    """DCBX convergence and APP-chain times (dcblab/scenarios/dcbx.py),
    each run in a lab of its own; rows of median and max."""
    ets, whole, mapped, change, withdraw = [], [], [], [], []
    for i in range(args.dcbx_runs):
        say(f"bench: DCBX and APP chain {i + 1}/{args.dcbx_runs}")
        lab = Lab(topo, f"bench-dcbx-{os.getpid()}")
        try:
            lab.up(owner_pid=os.getpid(), accel=accel)
            handle = LabHandle(lab)
            n = negotiate(handle)
            ets.append(n.seconds)
            whole.append(n.seconds_all)
            fresh_lldpad([handle.h1, handle.h2])
            r = app_chain(handle, burst=1000)
        finally:
            lab.down()
        mapped.append(r.phases[0].seconds)
        change.append(r.phases[1].seconds)
        withdraw.append(r.phases[2].seconds)
    med, n = statistics.median, args.dcbx_runs
    rows = []
    for name, values, what in (
            ("DCBX: h2's ETS-REC -> h1's driver", ets,
             "h1 willing; `dcb -j ets show` equal to the REC"),
            ("  ETS, PFC and APP all", whole, "the same, all three equal"),
            ("APP on h2 -> cgroup map on h1", mapped,
             "dcbapp-netprio's ifpriomap on eth0 and eth0.100"),
            ("APP prio change -> first new PCP", change,
             "5 -> 3 under a 500 frames/s stream, counted on h2 (goal 2 s)"),
            ("APP withdrawn -> first PCP 0", withdraw, "the same stream")):
        rows.append((name, f"{med(values):.2f} s",
                     f"median of {n} labs, max {max(values):.2f} s: {what}; "
                     "from before the lldptool runs on h2, ~0.1 s resolution"))
    return rows


def _snapshot_rows(args, accel):
    """Labs from snapshots (lab/snapshots.py): per topology, its snapshot
    removed, one cold up that saves it, then restored ups; against the
    cold ups of the same run (--cold)."""
    from ..lab import snapshots
    med = statistics.median
    rows = []
    for (file, goal), backend in itertools.product(
            (("two-hosts.toml", 1.0), ("dcb-fabric.toml", 2.0)),
            ("qemu", "libvirt")):
        topo = load(paths.ROOT / "topology" / file)
        slot = snapshots.slot_name(topo.name, backend, "lab")
        name = f"{topo.name} on {backend}"
        if (snapshots.store() / slot).exists():
            snapshots.remove([slot])
        cold, restored, per_host, saved = [], [], [], None
        for i in range(args.snapshot_runs + 2):
            kind = ("cold" if i == 0 else "saving" if i == 1
                    else "restored")
            say(f"bench: {name} up, {kind} ({i + 1}/"
                f"{args.snapshot_runs + 2})")
            lab = Lab(topo, f"bench-snap-{os.getpid()}", backend=backend)
            try:
                t = lab.up(owner_pid=os.getpid(), accel=accel,
                           cold=(i == 0))
                snap = lab.state.get("snapshot") or {}
                if i == 0:
                    cold.append(t["total"])
                elif i == 1:
                    saved = (t["total"], t.get("snapshot_save", 0.0))
                elif snap.get("restored"):
                    restored.append(t["total"])
                    per_host.append(max(h["ready"] for n, h in t.items()
                                        if isinstance(h, dict)))
            finally:
                lab.down()
        size = next((r["bytes"] for r in snapshots.listing()
                     if r["name"] == slot), 0)
        n = len(restored)
        if not n:
            rows.append((f"{name} up, restored", "none",
                         f"no up of {args.snapshot_runs} restored: see the "
                         "progress lines"))
            continue
        rows += [
            (f"{name} up, restored", f"{med(restored):.2f} s",
             f"median of {n}, max {max(restored):.2f} s (goal <= "
             f"{goal:.0f} s); cold, same run: {cold[0]:.2f} s"),
            ("  QEMU start -> last guest ready", f"{med(per_host):.2f} s",
             "median: state loaded, resumed, agent, clock and CRNG"),
            ("  the cold up that saved it", f"{saved[0]:.2f} s",
             f"guests paused {saved[1]:.2f} s to save {size / 1e6:.0f} MB "
             f"({len(topo.hosts)} guests)"),
        ]
    return rows


def _fabric_rows(args, accel):
    """The fabric (topology/dcb-fabric.toml): up -> all ready for its four
    guests, the switch's forwarding rate with the shaper lifted, and the
    ETS share error of the shares scenario; each run a lab of its own."""
    from ..scenarios.fabric import forwarding_capacity, offer, wire_bytes
    topo = load(paths.ROOT / "topology" / "dcb-fabric.toml")
    ups, fwd, errors, wire = [], [], [], []
    for i in range(args.fabric_runs):
        say(f"bench: fabric {i + 1}/{args.fabric_runs}")
        lab = Lab(topo, f"bench-fab-{os.getpid()}")
        try:
            ups.append(lab.up(owner_pid=os.getpid(), accel=accel,
                              cold=True)["total"])
            handle = LabHandle(lab)
            r = offer(handle, (0, 2, 3), load=1.2)
            errors.append(max(abs(r.share(p) - r.expected[p])
                              for p in r.expected))
            wire.append(r.wire_bps)
            fwd.append(forwarding_capacity(handle))
        finally:
            lab.down()
    med, n = statistics.median, args.fabric_runs
    fps = [f for f, _, _ in fwd]
    dropped = sum(d for _, _, d in fwd)
    limit = (f"sw's taps dropped {dropped} frames: the switch is the limit"
             if dropped else "0 dropped at sw's taps: the two 1-vCPU "
             "senders are the limit, sw forwards at least this")
    return [
        ("fabric up -> all ready (4 VMs)", f"{med(ups):.2f} s",
         f"median of {n} cold ups, max {max(ups):.2f} s; 3 hosts + "
         "switch, lldpad and DCBX setup included (restored: above)"),
        ("switch forwarding, one port", f"{med(fps):.0f} f/s",
         f"median of {n}, {med(fps) * 8 * wire_bytes() / 1e6:.1f} Mbit/s of "
         f"{wire_bytes()}-byte frames, shaper lifted; {limit}; offered "
         f"{fwd[0][1]} f/s"),
        ("ETS share error (3 classes)", f"{100 * med(errors):.1f} pp",
         f"median of {n}, max {100 * max(errors):.1f} pp: largest |measured "
         "- configured| share at h3 (goal 5 pp); port "
         f"{med(wire) / 1e6:.2f} Mbit/s on the wire"),
    ]


SPLIT_PAIR = paths.ROOT / "tests" / "data" / "pair-split.toml"


def _local_twin(split, workdir):
    """split's topology with every host on this machine: the same lab
    with its link local (the [machines] tables and machine keys gone)."""
    out, skip = [], False
    for line in Path(split).read_text().splitlines():
        m = _TABLE_HEADER.match(line)
        if m:
            skip = m.group(1).startswith("machines.")
        if skip or re.match(r"\s*machine\s*=", line):
            continue
        out.append(line)
    path = Path(workdir) / "pair-local.toml"
    path.write_text("\n".join(out).replace('name = "pair-split"',
                                            'name = "pair-local"') + "\n")
    return load(path)


def _link_cost(handle, frames):
    """(median RTT ms, frames/s h2 received) of h1 -> h2 over l1: 50
    prioping probes, then frames at the sender's full rate."""
    from ..scenarios.fabric import idle_rtt
    from ..testing.traffic import Sink, flow_of
    h1, h2 = handle.guest("h1"), handle.guest("h2")
    dst = handle.topology.address("h2", vlan=100)
    h1.run(["ping", "-c", "1", "-W", "5", dst])
    rtt = statistics.median(idle_rtt(h1, dst, 0, count=50))
    sink = Sink(h2, "eth0", count=frames, timeout=60, idle=3)
    sent = send(h1, dst, count=frames, flow=21)
    got = flow_of(sink.result(), 21)["received"]
    return rtt, got / sent["elapsed_s"], got / frames


def _split_rows(args, accel):
    """A cross-machine link against a local one (docs/scale.md): the pair
    of tests/data/pair-split.toml across the two-machine simulation
    (h1 on a, h2 on b, l1 in VXLAN over the sim's veth) and the same pair
    on this machine, booted in turn; RTT and frames/s over l1."""
    from ..core.remote import SSH_CONFIG_ENV
    from ..lab.simmachines import SimMachines
    split = load(SPLIT_PAIR)
    res = {"local": [], "cross": []}
    old = os.environ.get(SSH_CONFIG_ENV)
    with tempfile.TemporaryDirectory() as tmp, \
            SimMachines(("a", "b"), name=f"bench{os.getpid()}") as sim:
        local = _local_twin(SPLIT_PAIR, tmp)
        os.environ[SSH_CONFIG_ENV] = str(sim.ssh_config)
        try:
            for i in range(args.split_runs):
                for kind, topo in (("local", local), ("cross", split)):
                    say(f"bench: {kind} link {i + 1}/{args.split_runs}")
                    lab = Lab(topo, f"bench-{kind}-{os.getpid()}"[:16])
                    try:
                        t = lab.up(owner_pid=os.getpid(), accel=accel,
                                   cold=True)["total"]
                        res[kind].append((t, *_link_cost(LabHandle(lab),
                                                         args.frames)))
                    finally:
                        lab.down()
        finally:
            if old is None:
                os.environ.pop(SSH_CONFIG_ENV, None)
            else:
                os.environ[SSH_CONFIG_ENV] = old
    med, n = statistics.median, args.split_runs

    def col(kind, i):
        return med(r[i] for r in res[kind])

    def span(kind, i, fmt):
        vals = [r[i] for r in res[kind]]
        return f"{fmt.format(min(vals))}..{fmt.format(max(vals))}"
    rows = []
    for kind in ("local", "cross"):
        rows += [
            (f"{kind} pair up (2 VMs)", f"{col(kind, 0):.2f} s",
             f"median of {n} cold ups ({span(kind, 0, '{:.1f}')} s)"),
            (f"{kind} link RTT", f"{col(kind, 1):.3f} ms",
             f"median of {n} runs' medians of 50 prioping probes h1 -> h2 "
             f"({span(kind, 1, '{:.3f}')} ms)"),
            (f"{kind} link frames/s", f"{col(kind, 2):.0f} f/s",
             f"median of {n} ({span(kind, 2, '{:.0f}')}): {args.frames} "
             "frames at priosend's full rate, received by h2 / send time; "
             f"received {100 * col(kind, 3):.1f} % "
             f"({span(kind, 3, '{:.3f}')})"),
        ]
    rows.append(("cross / local: RTT, frames/s",
                 f"{col('cross', 1) / col('local', 1):.2f}, "
                 f"{col('cross', 2) / col('local', 2):.2f}",
                 "ratios of the medians above, measured in the same run"))
    return rows


def _in_fabric_labs(what, tag, n, accel, measure):
    """measure(handle) in each of n fabric labs of its own, one after the
    other: the list of what it returned."""
    topo = load(paths.ROOT / "topology" / "dcb-fabric.toml")
    runs = []
    for i in range(n):
        say(f"bench: {what} {i + 1}/{n}")
        lab = Lab(topo, f"bench-{tag}-{os.getpid()}")
        try:
            lab.up(owner_pid=os.getpid(), accel=accel)
            runs.append(measure(LabHandle(lab)))
        finally:
            lab.down()
    return runs


def _pfc_rows(args, accel):
    """The fabric's lossless class (docs/pfc.md): per run, one lab,
    priority 3 with PFC at 1.2x and 2x the port rate, the negative
    control, and head-of-line blocking."""
    from ..scenarios.pfc import head_of_line, lossless
    runs = _in_fabric_labs("PFC", "pfc", args.pfc_runs, accel, lambda h: {
        "1.2": lossless(h, load=1.2), "2": lossless(h, load=2.0),
        "off": lossless(h, load=1.2, pfc=False), "hol": head_of_line(h)})
    med, n = statistics.median, args.pfc_runs
    rows = []
    for key in ("1.2", "2"):
        rs = [r[key] for r in runs]
        rows.append((f"PFC {key}x: PCP 3 lost", f"{max(r.lost(3) for r in rs)}",
                     f"worst of {n} (goal 0), of {rs[0].sent(3)} sent; PCP 0/2 "
                     f"dropped {med(r.band_drops[0] for r in rs):.0f}/"
                     f"{med(r.band_drops[2] for r in rs):.0f} at sw (median)"))
        rows.append(("  pause frames sw -> h1 / h1 got", " / ".join(
            (f"{med(r.requests['swp1'] for r in rs):.0f}",
             f"{med(r.indications['h1'] for r in rs):.0f}")),
            "median; sw:swp1's requests, h1's indications (goal equal)"))
        rows.append(("  band peak / XOFF", f"{med(r.pfcd['peak_backlog'] for r in rs) / rs[0].thresholds[0]:.0f}x",
                     f"median of {n}: largest backlog of the lossless band "
                     f"{med(r.pfcd['peak_backlog'] for r in rs):.0f} B, XOFF "
                     f"{rs[0].thresholds[0]} B, limit "
                     f"{rs[0].thresholds[0] + rs[0].thresholds[2]} B; XOFF -> "
                     f"peak {med(r.pfcd['reaction_ms'] for r in rs):.0f} ms"))
    off = [r["off"] for r in runs]
    rows.append(("PFC off: PCP 3 lost", f"{med(r.lost(3) for r in off):.0f}",
                 f"median of {n}, of {off[0].sent(3)} sent: the negative "
                 "control (goal > 0)"))
    hol = [r["hol"] for r in runs]
    rows.append(("head-of-line: RTT paused / alone",
                 f"{med(h.slowdown for h in hol):.0f}x",
                 f"median of {n}: PCP-3 prioping h1 -> h2 (idle path), "
                 "median RTT while sw pauses h1 for swp3 over alone"))
    return rows


def _roce_rows(args, accel):
    """RoCEv2 through the fabric (docs/roce.md): per run, one lab, a
    stream alone, two streams on VLAN 100 under load with PFC and
    without (the band then a lossy class's 16-packet buffer), and
    ib_send_lat at the strict class and best effort under load."""
    from ..scenarios.roce import send_latency, write_streams
    runs = _in_fabric_labs("RoCE", "roce", args.roce_runs, accel, lambda h: {
        "alone": write_streams(h, senders=("h1",)),
        "on": write_streams(h, vlan=100, load=1.2),
        "off": write_streams(h, vlan=100, load=1.2, pfc=False),
        "strict": send_latency(h, prio=5), "be": send_latency(h, prio=0)})
    med, n = statistics.median, args.roce_runs

    def m(key, f):
        return med(f(r[key]) for r in runs)
    rows = [("RoCE alone: goodput",
             f"{m('alone', lambda r: r.goodput_mbit_s):.2f} Mbit/s",
             f"median of {n}: one ib_write_bw h1 -> h3, 10 s window, "
             "payload rxe's responder took in order; swp3 shaped to 10 "
             "Mbit/s")]
    for key, what in (("on", "PFC on"), ("off", "PFC off")):
        rows.append((f"RoCE 2 streams, {what}: goodput",
                     f"{m(key, lambda r: r.goodput_mbit_s):.2f} Mbit/s",
                     f"median of {n}: h1 + h2 -> h3 on VLAN 100, PCP 0 "
                     "and 2 at 1.2x the port each; the band's ETS share "
                     "is 5 Mbit/s"))
        rows.append((f"  RoCE band drops, {what}",
                     f"{m(key, lambda r: r.band_drops):.0f}",
                     f"median of {n}: at swp3, in the 10 s window"))
        rows.append((f"  rxe errors, {what}",
                     f"{m(key, lambda r: r.error_total):.0f}",
                     f"median of {n}: {', '.join(ERRS)} on both ends"))
    for key, what in (("strict", "strict (DSCP 46)"),
                      ("be", "best effort (DSCP 0)")):
        rows.append((f"RoCE latency under load, {what}",
                     f"{m(key, lambda r: r.t_avg_us / 1000):.2f} ms",
                     f"median of {n}: ib_send_lat h1 -> h3, average over "
                     f"16 s; round trips {m(key, lambda r: r.iterations):.0f}"
                     " (inf: none completed)"))
    return rows


# --- the soak ----------------------------------------------------------------

def _soak_rows(args):
    """`dcblab soak` with bench's numbers (the issue's by default): its
    cycles, leaks, up/down medians, duration and descriptor drift."""
    def start(seed, cycles):
        say(f"bench: {plan_line(seed, cycles, args.soak_budget)}")
        say(header())
    r = soak(args.soak_seed, args.soak_clean, args.soak_killed,
             args.soak_budget, on_start=start,
             on_cycle=lambda c: say(cycle_line(c)))
    med = statistics.median
    kinds = r.kinds()
    budget = "; stopped by its budget" if r.stopped == "budget" else ""
    rows = [("soak: cycles run", f"{len(r.cycles)}/{len(r.planned)}",
             f"{kinds['clean']} up/exec/down, {kinds['killed']} with `up`, "
             "the keeper or pytest SIGKILLed then `dcblab reap`; seed "
             f"{r.seed}{budget}"),
            ("  cycles that leaked", f"{r.leaks}",
             r.report or "census after each: QEMUs, libvirtds, processes, "
             "netns, taps, run dirs, mounts, files written, driver fds")]
    if r.ups():
        by = ", ".join(f"{b} {med(r.ups(b)):.2f}" for b in ("qemu", "libvirt")
                       if r.ups(b))
        rows.append(("  `dcblab up` from a shell", f"{med(r.ups()):.2f} s",
                     f"median of {len(r.ups())} clean cycles ({by} s), "
                     "interpreter start included"))
    if r.downs():
        rows.append(("  `dcblab down` from a shell",
                     f"{med(r.downs()):.2f} s",
                     f"median of {len(r.downs())}"))
    if r.settles():
        rows.append(("  killed lab gone after", f"{med(r.settles()):.2f} s",
                     f"median of {len(r.settles())}, max "
                     f"{max(r.settles()):.2f} s: SIGKILL to its run dir "
                     "unheld, by its own keeper or guard"))
    rows += [
        ("  soak duration", f"{r.seconds:.0f} s",
         f"budget {r.budget_s:.0f} s; load {r.load_start[0]:.1f} -> "
         f"{r.load_end[0]:.1f}, {r.other_qemus} other QEMUs at start"),
        ("  driver fd drift", f"{r.fds_end - r.fds_start:+d}",
         f"{r.fds_start} -> {r.fds_end} open in the soak's process"),
        ("  host file handles drift",
         f"{r.file_handles_end - r.file_handles_start:+d}",
         f"{r.file_handles_start} -> {r.file_handles_end} allocated "
         "(/proc/sys/fs/file-nr), the whole machine's"),
    ]
    return rows


def bench(args):
    accel = choose_accel(paths.bzimage(), paths.initramfs())
    med = statistics.median
    others = len(proc.pids_with_tag("qemu-system"))
    say(f"bench: {others} other QEMU process(es) running as it starts; "
        "figures move with what else runs")
    rows = []
    if not args.no_cold_build:
        say("bench: cold kernel build in a fresh BUILD dir (minutes) ...")
        rows.append(("cold kernel build", f"{_cold_build_seconds():.1f} s",
                     f"extract+patch+config+bzImage, -j{os.cpu_count()}"))

    if args.boots:
        inits, guests, readies = _one_vm_boots(args.boots, accel)
        rows += [
            ("QEMU start -> init reached", f"{med(inits):.2f} s",
             f"one VM, median of {args.boots}, host clock to console line"),
            ("  same, guest uptime", f"{med(guests):.2f} s",
             "printk timestamp of init's first line"),
            ("QEMU start -> guest ready", f"{med(readies):.2f} s",
             "one VM, agent answers guest-sync"),
        ]

    topo = load(paths.default_topology())
    if args.cycles:
        rows += _cycles(topo, args, accel)
    if args.backend_cycles:
        rows += _backend_rows(topo, args, accel)
    if args.rate_runs:
        rows += _rate_rows(topo, args, accel)
    if args.datapath_runs:
        rows += _datapath_rows(topo, args, accel)
    if args.patch_runs and args.without:
        rows += _patch_cost_rows(topo, args, accel)
    if args.dcbx_runs:
        rows += _dcbx_rows(topo, args, accel)
    if args.snapshot_runs:
        rows += _snapshot_rows(args, accel)
    if args.fabric_runs:
        rows += _fabric_rows(args, accel)
    if args.pfc_runs:
        rows += _pfc_rows(args, accel)
    if args.roce_runs:
        rows += _roce_rows(args, accel)
    if args.split_runs:
        rows += _split_rows(args, accel)
    if args.soak_clean or args.soak_killed:
        rows += _soak_rows(args)
    if args.suite:
        rows += _suite_rows()
    say(f"\n{'figure':<36} {'value':>10}  how measured ({accel}, "
        f"{os.cpu_count()} host cores, {others} other QEMU at start)")
    for k, v, how in rows:
        say(f"{k:<36} {v:>10}  {how}")
    return 0


def cmd_bench(args):
    need_images()
    sigterm_as_exit()
    return bench(args)


def add_parsers(sub):
    p = sub.add_parser("bench", help="measure build, boot, lab, scenario "
                                     "and suite figures")
    p.add_argument("--boots", type=int, default=5,
                   help="single-VM boots to time (default 5; 0 skips)")
    p.add_argument("--cycles", type=int, default=20,
                   help="two-VM up/down cycles (default 20; 0 skips)")
    p.add_argument("--execs", type=int, default=200,
                   help="guest-exec round trips to time (default 200)")
    p.add_argument("--cli-execs", type=int, default=20,
                   help="`dcblab exec` runs from a shell to time (default "
                        "20)")
    p.add_argument("--backend-cycles", type=int, default=5,
                   help="up/down cycles on each backend, qemu and libvirt "
                        "in turn (default 5; 0 skips)")
    p.add_argument("--backend-execs", type=int, default=50,
                   help="exec round trips per backend cycle (default 50)")
    p.add_argument("--frames", type=int, default=100_000,
                   help="frames of each classification run (default 10^5)")
    p.add_argument("--vcpus", nargs="+", default=["1", "2"], metavar="N[,N]",
                   help="vCPUs of the classification labs: N for every "
                        "host, or one count per host in topology order "
                        "(default: 1 and 2; the shipped counts are added)")
    p.add_argument("--rate-runs", type=int, default=3,
                   help="classification runs per vCPU setting (default 3; "
                        "0 skips)")
    p.add_argument("--datapath-runs", type=int, default=3,
                   help="labs in which the tools' classified frames/s are "
                        "set against kernel pktgen's on the same link "
                        "(default 3; 0 skips)")
    p.add_argument("--without", nargs="*", default=list(MEASURED),
                   metavar="PATCH",
                   help="patches whose cost to measure: the series is "
                        "measured against the series without each "
                        "(default: 0004 0001; a prefix of the file name)")
    p.add_argument("--patch-runs", type=int, default=5,
                   help="classification runs per kernel for --without, "
                        "interleaved (default 5; 0 skips)")
    p.add_argument("--dcbx-runs", type=int, default=3,
                   help="labs to time DCBX convergence and the APP chain in "
                        "(default 3; 0 skips)")
    p.add_argument("--pfc-runs", type=int, default=1,
                   help="fabric labs for the PFC figures (docs/pfc.md), "
                        "~2 min each (default 1; 0 skips)")
    p.add_argument("--roce-runs", type=int, default=1,
                   help="fabric labs for the RoCE figures (docs/roce.md), "
                        "~3 min each (default 1; 0 skips)")
    p.add_argument("--snapshot-runs", type=int, default=5,
                   help="restored ups per topology (two-hosts, dcb-fabric) "
                        "after a cold one and one that saves (0: none)")
    p.add_argument("--fabric-runs", type=int, default=2,
                   help="dcb-fabric labs to time up, the switch's forwarding "
                        "rate and the ETS share error in (default 2; 0 "
                        "skips)")
    p.add_argument("--split-runs", type=int, default=2,
                   help="pairs booted with their link local and across two "
                        "simulated machines, in turn, for the cross-machine "
                        "link's RTT and frames/s (docs/scale.md; default 2; "
                        "0 skips)")
    p.add_argument("--soak-clean", type=int, default=DEFAULT_CLEAN,
                   help=f"soak: up/exec/down cycles (default {DEFAULT_CLEAN};"
                        " 0 with --soak-killed 0 skips the soak)")
    p.add_argument("--soak-killed", type=int, default=DEFAULT_KILLED,
                   help="soak: cycles with a SIGKILL, then reap (default "
                        f"{DEFAULT_KILLED})")
    p.add_argument("--soak-seed", type=int,
                   help="soak: the seed (default: a random one, printed)")
    p.add_argument("--soak-budget", type=float, default=DEFAULT_BUDGET_S,
                   help="soak: seconds it may take (default "
                        f"{DEFAULT_BUDGET_S:.0f})")
    p.add_argument("--no-suite", dest="suite", action="store_false",
                   help="skip the warm and cold-check `make test` runs "
                        "(minutes; each boots a lab)")
    p.add_argument("--no-cold-build", action="store_true",
                   help="skip the cold kernel build (minutes)")
    p.set_defaults(func=cmd_bench)
