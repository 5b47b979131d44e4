"""A lab: a topology brought up as a wire plus one VM per host.

State lives in a 0700 run directory, ``/run/dcblab/<name>/``
(``DCBLAB_RUN`` overrides the parent): ``state.json`` and one
sub-directory per host with that VM's sockets and logs.

``state.json`` records the run id, the owner (pid and start time of the
process that owns the lab) and the QEMU pids. The owner is the process
that brought the lab up while it is starting, and a pytest session for a
session lab; a lab that ``dcblab up`` finished has no owner and stays up
until ``dcblab down``. ``reap()`` removes labs whose owner died, labs whose
VMs are all gone, and namespaces or QEMU processes carrying a dcblab run id
that no live lab claims; it touches nothing else.
"""

import json
import os
import re
import shutil
import signal
import threading
import time
import uuid
from pathlib import Path

from . import paths, wire
from .accel import choose_accel
from .agent import AgentError
from .cmd import CmdError
from .topology import load
from .vm import Nic as VmNic
from .vm import Vm, VmError, VmSpec

__all__ = ["Lab", "LabError", "run_root", "list_labs", "reap", "baseline_ip"]


class LabError(Exception):
    pass


_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,15}$")


def run_root():
    return Path(os.environ.get("DCBLAB_RUN", "/run/dcblab"))


def _start_time(pid):
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1]
        return int(fields.split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid, start):
    return pid is not None and _start_time(pid) is not None and \
        (start is None or _start_time(pid) == start)


def _qemu_pids(run_id):
    """Pids of processes whose command line carries this run id."""
    tag = f"dcblab.run={run_id}".encode()
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if tag in (d / "cmdline").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


def _kill(pids, grace=3.0):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            pids = [p for p in pids if _start_time(p) is not None
                    and not _zombie(p)]
            if not pids:
                return
            time.sleep(0.05)


def _zombie(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1] \
            .split()[0] == "Z"
    except OSError:
        return True


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


class Lab:
    """One running (or starting) lab."""

    def __init__(self, topology, name=None):
        self.topology = topology
        self.name = name or topology.name
        if not _NAME.match(self.name):
            raise LabError(f"lab name {self.name!r} must match {_NAME.pattern}"
                           " (it names the netns and the run directory)")
        self.dir = run_root() / self.name
        self.state_file = self.dir / "state.json"
        self.run_id = None
        self.wire = None
        self.vms = {}
        self.timings = {}

    # --- state -------------------------------------------------------------

    def _write_state(self, owner_pid, status):
        state = {"name": self.name, "run_id": self.run_id,
                 "topology": self.topology.path, "status": status,
                 "owner_pid": owner_pid,
                 "owner_start": _start_time(owner_pid) if owner_pid else None,
                 "created": time.time(),
                 "hosts": {n: {"pid": vm.pid,
                               "rundir": str(vm.rundir)}
                           for n, vm in self.vms.items()},
                 "netns": self.wire.netns if self.wire else None}
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(self.state_file)

    @classmethod
    def attach(cls, name):
        """The lab NAME as recorded by the process that brought it up."""
        state_file = run_root() / name / "state.json"
        try:
            state = json.loads(state_file.read_text())
        except FileNotFoundError:
            known = ", ".join(list_labs()) or "none"
            raise LabError(f"no lab named {name!r} is up (labs up: {known}); "
                           "start one with `dcblab up`") from None
        lab = cls(load(state["topology"]), name)
        lab.run_id = state["run_id"]
        lab.wire = wire.Wire(lab.topology, name, lab.run_id)
        for host in lab.topology.hosts:
            h = state["hosts"].get(host.name)
            if h:
                lab.vms[host.name] = Vm.attach(lab._spec(host, "tcg"),
                                               h["rundir"], h["pid"])
        lab.state = state
        return lab

    # --- up / down ---------------------------------------------------------

    def _spec(self, host, accel):
        nics = tuple(VmNic(n.name, wire.Wire.tap(n), self.wire.mac(n),
                           n.queues) for n in host.nics)
        return VmSpec(host.name, paths.bzimage(), paths.initramfs(),
                      memory_mib=host.memory_mib, cpus=host.cpus,
                      accel=accel, nics=nics, netns=self.wire.netns,
                      cmdline=(f"dcblab.run={self.run_id}",))

    def up(self, owner_pid=None, accel=None, progress=None):
        """Bring the lab up; returns per-host timings (seconds)."""
        say = progress or (lambda msg: None)
        missing = paths.missing_images()
        if missing:
            raise LabError(f"{', '.join(missing)} missing: run "
                           "`make kernel image`")
        run_root().mkdir(mode=0o755, parents=True, exist_ok=True)
        try:
            self.dir.mkdir(mode=0o700)
        except FileExistsError:
            raise LabError(f"lab {self.name!r} is already up ({self.dir}): "
                           f"`dcblab down --name {self.name}`, or "
                           "`dcblab reap` if its owner died") from None
        self.run_id = uuid.uuid4().hex[:12]
        self.wire = wire.Wire(self.topology, self.name, self.run_id)
        t0 = time.monotonic()
        try:
            self._write_state(owner_pid or os.getpid(), "starting")
            accel = accel or choose_accel(paths.bzimage(), paths.initramfs())
            self.wire.up()
            say(f"wire: netns {self.wire.netns}, "
                f"{len(self.topology.links)} link(s) "
                f"({time.monotonic() - t0:.2f}s)")
            for host in self.topology.hosts:
                vm = Vm(self._spec(host, accel), self.dir / host.name)
                self.vms[host.name] = vm
                vm.start()
            self._write_state(owner_pid or os.getpid(), "starting")
            errors = []
            threads = [threading.Thread(target=self._ready, args=(h, errors))
                       for h in self.topology.hosts]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise LabError("\n".join(errors))
            self._write_state(owner_pid, "up" if owner_pid is None
                              else "owned")
            self.timings["total"] = time.monotonic() - t0
            for h in self.topology.hosts:
                t = self.timings[h.name]
                say(f"{h.name}: init {t['init']:.2f}s, agent {t['agent']:.2f}s,"
                    f" baseline {t['ready']:.2f}s ({accel})")
            return self.timings
        except BaseException:
            self.down()
            raise

    def _ready(self, host, errors):
        vm = self.vms[host.name]
        try:
            t_init, _ = vm.wait_init(timeout=60)
            t_agent = vm.wait_ready(timeout=60)
            self.apply_baseline(host)
            self.timings[host.name] = {"init": t_init, "agent": t_agent,
                                       "ready": time.monotonic() - vm.t_start}
        except (VmError, AgentError, CmdError) as e:
            errors.append(f"{host.name}: {e}")

    def apply_baseline(self, host):
        vm = self.vms[host.name]
        for nic in host.nics:
            if nic.queues > 1:
                vm.run(["ethtool", "-L", nic.name, "combined",
                        str(nic.queues)])
        vm.run(["ip", "-batch", "-"],
               input="\n".join(baseline_ip(host)) + "\n")

    def down(self):
        """Stop the VMs, remove the wire and the run directory. Idempotent."""
        for vm in self.vms.values():
            vm.stop()
        if self.run_id:
            _kill(_qemu_pids(self.run_id))
        if self.wire:
            self.wire.down()
        shutil.rmtree(self.dir, ignore_errors=True)

    def host(self, name):
        self.topology.host(name)  # names the known hosts if unknown
        try:
            return self.vms[name]
        except KeyError:
            raise LabError(f"lab {self.name!r}: host {name!r} is not running")\
                from None


def list_labs():
    root = run_root()
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir()
                  if (d / "state.json").exists())


def _teardown(run_id, netns, rundir, say):
    pids = _qemu_pids(run_id) if run_id else []
    if pids:
        _kill(pids)
        say(f"killed {len(pids)} QEMU process(es) of run {run_id}")
    if netns and netns in wire.list_netns() and \
            wire.netns_run_id(netns) == run_id:
        wire.run(["ip", "netns", "del", netns], check=False)
        say(f"removed netns {netns}")
    if rundir and Path(rundir).exists():
        shutil.rmtree(rundir, ignore_errors=True)
        say(f"removed {rundir}")


def reap(say=print):
    """Remove what dead labs left behind; returns the run ids reaped."""
    reaped, live = [], set()
    for name in list_labs():
        d = run_root() / name
        try:
            st = json.loads((d / "state.json").read_text())
        except (OSError, ValueError):
            continue
        owner_ok = _alive(st.get("owner_pid"), st.get("owner_start"))
        vms_ok = any(_qemu_pids(st["run_id"]))
        dead = (not owner_ok) if st.get("owner_pid") else (not vms_ok)
        if dead:
            say(f"lab {name}: owner gone, reaping run {st['run_id']}")
            _teardown(st["run_id"], st.get("netns"), d, say)
            reaped.append(st["run_id"])
        else:
            live.add(st["run_id"])
    for ns in wire.list_netns():
        if not ns.startswith("dcblab-"):
            continue
        rid = wire.netns_run_id(ns)
        if rid and rid not in live:
            say(f"netns {ns}: run {rid} has no live lab, reaping")
            _teardown(rid, ns, None, say)
            reaped.append(rid)
    return reaped
