"""The lab keeper: the one process that owns a lab while it is up.

``Lab.up()`` starts ``python3 -m dcblab.lab.keeper NAME`` in a session of
its own, so a Ctrl-C in the terminal that ran ``dcblab up`` never reaches
it. That process is a *guard*: it marks itself a child subreaper and
forks the keeper proper, then only waits. The keeper brings the lab up,
reporting progress as JSON lines on its stdout until the lab is ready
(``{"progress": ...}`` ..., then ``{"ready": ...}`` or ``{"error": ...}``),
and from then on:

* is the parent of every QEMU of the lab, so it reaps them: a QEMU whose
  parent exits is re-parented to PID 1, and PID 1 in many containers
  (this machine's too) never reaps, so it would stay a zombie (on the
  libvirt backend libvirtd daemonises each QEMU: the orphan goes to the
  guard, a child subreaper, which reaps it; the keeper is libvirtd's
  parent);
* holds each guest's agent socket (which takes one client) and serves any
  number of clients on ``keeper.sock``: CLI calls, a pytest session, bench
  and a ``dcblab exec`` at the same time;
* notices a guest whose QEMU died, and records it in state.json;
* stops the lab on a ``down`` request, on SIGTERM or SIGINT, and when the
  lab's owner (a pytest session, a demo) dies; restarts one host on
  request.

If the keeper is killed outright, its QEMUs are re-parented to the guard,
which tears the run down by its run id and reaps them; if the guard is
killed, the keeper gets SIGTERM (parent-death signal) and stops the lab.

Protocol on keeper.sock: one JSON object per line each way. A request
``{"op": ...}`` gets one reply, ``{"ok": true, ...}`` or
``{"ok": false, "error": "...", "kind": "..."}``. Ops: ``call`` (one
qemu-guest-agent command for one host), ``status``, ``restart``,
``set_link`` (a guest NIC's link up or down), ``disown``, ``down``.
"""

import argparse
import concurrent.futures
import ctypes
import dataclasses
import json
import os
import select
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
import uuid

from .. import backends
from ..backends import libvirt_remote
from ..core import paths, proc
from ..core.errors import DcblabError
from ..core.flavours import flavour
from ..core.remote import SSH_CONFIG_ENV, ssh_base
from ..guest.agent import AgentError, AgentTimeout
from . import snapshots, splitwire, wire
from .baseline import apply_baseline
from .dcbx import (app_readvertise_script, dcbx_script, pfc_applied_script,
                   start_lldpad)
from .switch import enforced_script, run_script
from .reaper import run_pids, run_tag, teardown
from .runs import (SOCKET, TOPOLOGY, LabError, lab_dir,
                   load_lab_topology, rc_text, read_state, write_state)

__all__ = ["main", "host_spec"]
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option, value):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option})")


def host_spec(the_wire, host, the_flavour, accel, cmdline=()):
    """The VmSpec of one host of a lab (the_wire names its taps, MACs and
    netns); also what `dcblab export --libvirt` turns into domain XML."""
    nics = tuple(backends.TapNic(n.name, wire.Wire.tap(n),
                                 the_wire.mac(n), n.queues)
                 for n in host.nics)
    return backends.VmSpec(
        host.name, paths.boot_kernel(the_flavour.name), paths.initramfs(),
        memory_mib=max(host.memory_mib, the_flavour.min_memory_mib),
        cpus=host.cpus, accel=accel, nics=nics, netns=the_wire.netns,
        cmdline=tuple(cmdline))


class Keeper:
    """The lab NAME's guests, wire and clients, in the keeper process."""

    def __init__(self, name, backend, flavour_name, owner_pid, accel,
                 cold=False):
        self.name = name
        self.dir = lab_dir(name)
        self.topology = load_lab_topology(name, self.dir / TOPOLOGY)
        self.backend = backends.get(backend)
        self.flavour = flavour(flavour_name)
        self.owner_pid = owner_pid
        self.owner_start = proc.start_time(owner_pid) if owner_pid else None
        self.accel = accel
        self.run_id = uuid.uuid4().hex[:12]
        # A lab across machines (splitwire.py, docs/scale.md): a wire
        # part and a backend per machine.
        self.split = self.topology.split
        if self.split:
            self.wire = splitwire.SplitWire(self.topology, name, self.run_id)
            cold = True
        else:
            self.wire = wire.Wire(self.topology, name, self.run_id)
        self.backends = {}       # machine name -> its backend (split labs)
        self.images = {}         # machine name -> (kernel, initrd) there
        self.machines = {}
        self.hosts = {}          # host name -> its state.json entry
        self.locks = {h.name: threading.Lock() for h in self.topology.hosts}
        self.stop_reason = "stop requested"
        # Agent commands served per host: a client that sees no change
        # knows nobody touched the guest since it last looked.
        self.calls = {h.name: 0 for h in self.topology.hosts}
        # "HOST:NIC" of the NICs whose cable set_link pulled: a restored
        # lab plugs them back (testing/handle.py); a restart does.
        self.unplugged = set()
        self.status = "starting"
        self.stopping = threading.Event()
        self.stopped = threading.Event()
        self.state_lock = threading.Lock()
        # Held while a guest is started, so that an abort of the bring-up
        # (abort_bringup) sees every guest started before it and none
        # after it.
        self.start_lock = threading.Lock()
        self.aborted = False
        self.source = None
        # Snapshots (snapshots.py): cold neither restores nor saves one.
        self.cold = cold or not self.backend.snapshots
        self.snapshot = None     # {"slot", "key", "restored", "saved"}

    # --- state ---------------------------------------------------------------

    def write(self):
        with self.state_lock:
            write_state(self.name, {
                "name": self.name, "run_id": self.run_id,
                "topology": str(self.dir / TOPOLOGY), "source": self.source,
                "status": self.status, "backend": self.backend.name,
                "flavour": self.flavour.name, "accel": self.accel,
                "keeper_pid": os.getpid(),
                "keeper_start": proc.start_time(os.getpid()),
                "guard_pid": os.getppid(),
                "owner_pid": self.owner_pid, "owner_start": self.owner_start,
                "created": time.time(), "hosts": self.hosts,
                "netns": self.wire.netns, "mac_seed": self.wire.mac_seed,
                "snapshot": self.snapshot,
                "backend_info": self.backend.info(),
                "split": self.split,
                "ssh_config": os.environ.get(SSH_CONFIG_ENV),
                "machines": {m: b.info() for m, b in self.backends.items()}})

    # --- bring-up ---------------------------------------------------------------

    def spec(self, host):
        if not self.split:
            return host_spec(self.wire, host, self.flavour, self.accel,
                             (run_tag(self.run_id),))
        spec = host_spec(self.wire.part(host.name), host, self.flavour,
                         self.accel, (run_tag(self.run_id),))
        machine = self.topology.machine_of(host.name)
        if machine in self.images:
            kernel, initrd = self.images[machine]
            spec = dataclasses.replace(spec, kernel=kernel, initrd=initrd)
        return spec

    def backend_of(self, host):
        if not self.split:
            return self.backend
        return self.backends[self.topology.machine_of(host.name)]

    def start_host(self, host, restore=None):
        with self.start_lock:
            if self.aborted:
                raise LabError(f"{host.name}: not started: the lab is "
                               "stopping")
            m = self.backend_of(host).machine(self.spec(host),
                                              self.dir / host.name)
            self.machines[host.name] = m
            m.start(restore=restore)
        self.hosts[host.name] = {"pid": m.pid, "rundir": str(m.rundir),
                                 "state": "starting", "rc": None,
                                 "log": str(m.log_path()),
                                 "restored": restore is not None}
        if self.split:
            self.hosts[host.name]["machine"] = \
                self.topology.machine_of(host.name)
        return m

    # --- snapshots ---------------------------------------------------------

    def snapshot_key(self):
        """(slot, key, parts) of this lab (snapshots.make_key): each
        guest's machine with the run's own parts (netns, MACs, run tag)
        made placeholders."""
        ids = {}
        for host in self.topology.hosts:
            spec = self.spec(host)
            spec = dataclasses.replace(
                spec, netns="@NETNS@",
                nics=tuple(dataclasses.replace(n, mac="@MAC@")
                           for n in spec.nics),
                cmdline=tuple(w for w in spec.cmdline
                              if w != run_tag(self.run_id)))
            ids[host.name] = self.backend.identity(spec)
        key, parts = snapshots.make_key(
            topology_bytes=(self.dir / TOPOLOGY).read_bytes(),
            backend=self.backend.name, flavour=self.flavour.name,
            accel=self.accel, identities=ids,
            kernel=paths.boot_kernel(self.flavour.name),
            initrd=paths.initramfs())
        slot = snapshots.slot_name(self.topology.name, self.backend.name,
                                   self.flavour.name)
        return slot, key, parts

    def restore(self, snap, say):
        """Every guest from snap: loaded (paused, as saved), resumed
        together, then each one's agent, wall clock and randomness;
        per-host timings like ready_host's."""
        try:
            for host in self.topology.hosts:
                self.start_host(host, restore=snap.files[host.name])
        finally:
            for f in snap.files.values():
                f.close()
        self.write()
        timings = {h.name: {"restore": self.machines[h.name]
                            .wait_restored(timeout=60)}
                   for h in self.topology.hosts}
        self._record_pids()
        self._check_stopping()
        for m in self.machines.values():
            m.resume()

        def ready(host):
            m, t = self.machines[host.name], timings[host.name]
            t["agent"] = m.wait_ready(timeout=30)
            _fresh_guest(m, self.snapshot)
            self.hosts[host.name]["state"] = "running"
            t["ready"] = time.monotonic() - m.t_start
        errors = self._on_each_host(ready)
        if errors:
            raise LabError("\n".join(errors))
        return timings

    def _record_pids(self):
        """Each guest's pid in its state.json entry again: a libvirt
        guest's QEMU is a new process after a restore finished or a save
        (libvirt's save stops the domain, LibvirtVm.save restores it)."""
        for name, m in self.machines.items():
            if name in self.hosts:
                self.hosts[name]["pid"] = m.pid

    def _on_each_host(self, fn):
        """fn(host) for every host at once, each in a thread; the errors,
        one line per host that failed (naming it once: guest errors do)."""
        errors = []

        def run(host):
            try:
                fn(host)
            except DcblabError as e:
                errors.append(f"{e}" if f"{e}".startswith(f"{host.name}: ")
                              else f"{host.name}: {e}")
            except Exception as e:  # noqa: BLE001 - a guest killed under us
                if not self.stopping.is_set():
                    raise
                errors.append(f"{e}" if f"{e}".startswith(f"{host.name}: ")
                              else f"{host.name}: {e}")
        threads = [threading.Thread(target=run, args=(h,))
                   for h in self.topology.hosts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return errors

    def save_snapshot(self, slot, key, parts, say):
        """The ready lab saved as slot's snapshot; a failure (a full
        disk) is a progress line, not a failed up."""
        # A guest whose console showed a splat is not saved: every lab
        # restored from it would start past the splat, and no watcher
        # would see it again.
        splats = [f"{n}: {found[0].splitlines()[0]}"
                  for n, m in self.machines.items()
                  for found in [m.console.splats(since=0)] if found]
        if splats:
            say(f"snapshot {slot}: not saved: a kernel splat on a console "
                f"({splats[0]})")
            return None
        need = 2 * sum(max(h.memory_mib, self.flavour.min_memory_mib)
                       for h in self.topology.hosts) << 20
        snapshots.store().mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(snapshots.store()).free
        if free < need:
            say(f"snapshot {slot}: not saved: {free >> 20} MiB free in "
                f"{snapshots.store()}, {need >> 20} MiB wanted")
            return None
        try:
            snap, t = snapshots.save(slot, key, parts, self.machines,
                                     mac_seed=self.wire.mac_seed,
                                     lab=self.name, topology=self.source)
        except DcblabError as e:
            say(f"snapshot {slot}: not saved: {e}")
            return None
        finally:
            self._record_pids()
        say(f"snapshot {slot}: saved, {snap.size() / 1e6:.0f} MB (guests "
            f"paused {t:.2f}s); later ups restore it (`--cold`: not)")
        return t

    def ready_host(self, host):
        """Init, agent, baseline (and lldpad, with dcbx): per-host timings
        (host seconds since its QEMU started; "ready" is the last)."""
        m = self.machines[host.name]
        t_init, _ = m.wait_init(timeout=60)
        t_agent = m.wait_ready(timeout=60)
        apply_baseline(m, host)
        t = {"init": t_init, "agent": t_agent,
             "baseline": time.monotonic() - m.t_start}
        if self.topology.dcbx:
            # After the baseline: lldpad finds eth0 up, and sends at once.
            start_lldpad(m)
            if not host.is_switch:
                self.dcbx_setup(host)
            t["lldpad"] = time.monotonic() - m.t_start
        self.hosts[host.name]["state"] = "running"
        t["ready"] = time.monotonic() - m.t_start
        return t

    def dcbx_setup(self, host):
        """A fabric's lldpad configuration of one machine (dcbx_script):
        switch ports advertise, hosts facing them are willing. Switches
        only once every host is set up: a host whose lldpad
        configuration changes after it learnt the switch's APP entries
        drops them from its driver, and lldpad installs peer APP entries
        again only when the peer's APP TLV changes (seen: one host of
        three without the entry, at random)."""
        script = dcbx_script(host)
        if host.is_switch:
            # lldpad wrote its defaults to the drivers when it started:
            # ready once the topology's DCB is in them and pfcd made the
            # ets qdiscs follow it.
            script += pfc_applied_script(host) + enforced_script(host)
        if script:
            run_script(self.machines[host.name], script, "DCBX port setup")

    def dcbx_after_restart(self, host):
        """A restarted switch sets its ports up again; a restarted host's
        switch ports re-advertise their APP entries (dcbx_setup says
        why)."""
        if host.is_switch:
            self.dcbx_setup(host)
            return
        for nic in host.nics:
            if not nic.peer_is_switch:
                continue
            sw_name, port_name = nic.peer.split(":")
            script = app_readvertise_script(
                self.topology.host(sw_name).nic(port_name))
            if script:
                run_script(self.machines[sw_name], script, "APP re-advertise")

    def abort_bringup(self):
        """Stop the bring-up at once: kill every guest started so far (the
        threads waiting for them see them die) and start no other. down()
        then removes the rest."""
        with self.start_lock:
            self.aborted = True
            started = list(self.machines.values())
        # A guest on another machine has a pid of that machine: it is
        # stopped through its libvirtd.
        pids = [m.pid for m in started if m.pid and not m.remote]
        if pids:
            proc.kill(pids, grace=0.5)
        for m in started:
            if m.remote:
                m.stop(grace=0.5)

    def _check_stopping(self):
        if self.stopping.is_set():
            raise LabError(f"lab {self.name}: stopped before it was ready "
                           f"({self.stop_reason})")

    def up(self, say):
        t0 = time.monotonic()
        self.write()
        if not self.accel:
            self.accel = self.backend.accel(paths.boot_kernel(self.flavour.name),
                                            paths.initramfs())
        self._check_stopping()
        if self.split:
            return self._up_split(t0, say)
        snap, want = None, None
        if not self.cold:
            slot, key, parts = self.snapshot_key()
            want = (slot, key, parts)
            snap, why = snapshots.find(slot, key, parts,
                                       [h.name for h in self.topology.hosts])
            self.snapshot = {"slot": slot, "key": key,
                             "restored": snap is not None, "saved": False}
            if snap is None:
                say(f"snapshot {slot}: {why}: booting cold")
            else:
                self.wire.mac_seed = snap.meta["mac_seed"]
        self.wire.up()
        links = len(self.topology.links)
        say(f"wire: netns {self.wire.netns}, {links} "
            f"link{'s' if links != 1 else ''} ({time.monotonic() - t0:.2f}s)")
        self._check_stopping()
        t_open = self.backend.open(self.dir, self.wire.netns,
                                   run_tag(self.run_id))
        self._check_stopping()
        info = self.backend.info()
        if info:
            self.write()
            say(f"{self.backend.name}: {info.get('uri', '')} ({t_open:.2f}s)")
        if snap is not None:
            try:
                timings = self.restore(snap, say)
            except DcblabError as e:
                self._check_stopping()
                # A state QEMU cannot load (or a guest that does not come
                # back): that snapshot goes, the lab boots cold.
                for m in self.machines.values():
                    m.stop(grace=0.5)
                self.machines.clear()
                self.hosts.clear()
                snapshots.remove([want[0]])
                first = str(e).splitlines()[0]
                say(f"snapshot {want[0]}: not restored ({first}): removed; "
                    "booting cold")
                self.wire.mac_seed = self.name
                self.snapshot["restored"] = False
                snap = None
            else:
                return self._up_done(t0, t_open, timings, say)
        timings = self._boot_all()
        if want is not None:
            self._check_stopping()
            t_save = self.save_snapshot(*want, say)
            if t_save is not None:
                timings["snapshot_save"] = t_save
                self.snapshot["saved"] = True
        return self._up_done(t0, t_open, timings, say)

    def _boot_all(self):
        """Every guest booted, ready and (a fabric's) DCBX set up: their
        timings (ready_host)."""
        for host in self.topology.hosts:
            self.start_host(host)
        self.write()
        timings = {}

        def ready(host):
            timings[host.name] = self.ready_host(host)
        errors = self._on_each_host(ready)
        self._check_stopping()
        if errors:
            raise LabError("\n".join(errors))
        if self.topology.dcbx:
            for sw in self.topology.switches:
                self.dcbx_setup(sw)
        return timings

    def _up_split(self, t0, say):
        """Every machine's part (splitwire.py, libvirt_remote.py): its
        underlay checked, its wire, the images copied there, its
        libvirtd; then the guests, booted cold, as on one machine."""
        shells = {m: p.shell for m, p in self.wire.parts.items()}
        splitwire.check_underlays(self.topology, shells)
        wrapper = libvirt_remote.wrapper_script(
            self.dir / "ssh", ssh_base(tag=run_tag(self.run_id)))
        opened = {}

        def machine_part(name, part):
            t1 = time.monotonic()
            part.up()
            if part.shell.remote:
                backend = libvirt_remote.RemoteLibvirtBackend(part.shell,
                                                              wrapper)
                self.images[name] = backend.push_images(
                    self.dir, paths.boot_kernel(self.flavour.name),
                    paths.initramfs())
            else:
                backend = backends.get(self.backend.name)
            self.backends[name] = backend
            self._check_stopping()
            opened[name] = backend.open(self.dir, part.netns,
                                        run_tag(self.run_id))
            crossing = len(part.cross())
            say(f"machine {name or 'here'}: wire {len(part.taps())} taps, "
                f"{crossing} VXLAN link{'s' if crossing != 1 else ''}, "
                f"libvirtd up ({time.monotonic() - t1:.2f}s)")
        # Every machine's part at once, each in a thread; the first
        # error fails the up (down() then removes every part).
        pool = concurrent.futures.ThreadPoolExecutor
        with pool(len(self.wire.parts)) as ex:
            futures = [ex.submit(machine_part, n, p)
                       for n, p in self.wire.parts.items()]
        for f in futures:
            f.result()
        t_open = sum(opened.values())
        self.write()
        timings = self._boot_all()
        return self._up_done(t0, t_open, timings, say)

    def _up_done(self, t0, t_open, timings, say):
        timings["total"] = time.monotonic() - t0
        timings["backend_open"] = t_open
        for h in self.topology.hosts:
            t = timings[h.name]
            if "restore" in t:
                say(f"{h.name}: restored {t['restore']:.2f}s, agent "
                    f"{t['agent']:.2f}s ({self.accel}, {self.flavour.name} "
                    f"kernel, snapshot {self.snapshot['slot']})")
                continue
            lldpad = f", lldpad {t['lldpad']:.2f}s" if "lldpad" in t else ""
            say(f"{h.name}: init {t['init']:.2f}s, agent {t['agent']:.2f}s, "
                f"baseline {t['baseline']:.2f}s{lldpad} ({self.accel}, "
                f"{self.flavour.name} kernel)")
        self.status = "up"
        self.write()
        return timings

    def down(self):
        """Stop the guests, remove the wire and the run directory; on a
        split lab every machine's part, each whatever another did."""
        self.status = "stopping"
        for m in self.machines.values():
            try:
                m.stop()
            except DcblabError as e:
                print(f"keeper: {m.name}: {e}", file=sys.stderr, flush=True)
        self.backend.close()
        for b in self.backends.values():
            b.close()
        # A split lab's other machines: teardown (reaper.py), by ssh,
        # before anything of the run here goes.
        if not self.split:
            proc.kill(run_pids(self.run_id))
            self.wire.down()
        teardown(self.run_id, None, self.dir,
                 say=lambda m: print(f"keeper: {m}", file=sys.stderr,
                                     flush=True))

    # --- while up ---------------------------------------------------------------

    def watch(self):
        """Main thread: notice dead guests and a dead owner, until told to
        stop."""
        while not self.stopping.wait(0.2):
            if self.owner_pid and not proc.alive(self.owner_pid,
                                                 self.owner_start):
                print(f"keeper: owner {self.owner_pid} is gone: stopping",
                      flush=True)
                self.stopping.set()
                break
            changed = False
            for name, m in list(self.machines.items()):
                entry = self.hosts[name]
                if entry["state"] == "running" and not m.alive():
                    entry["state"] = "gone"
                    entry["rc"] = m.returncode
                    entry["died"] = time.time()
                    print(f"keeper: {name}: QEMU exited (rc "
                          f"{rc_text(entry['rc'])})",
                          flush=True)
                    changed = True
            if changed:
                self.write()

    def restart(self, name):
        host = self.topology.host(name)
        with self.locks[name]:
            entry = self.hosts[name]
            entry["state"] = "restarting"
            self.write()
            self.machines[name].stop()
            self.unplugged -= {f"{name}:{n.name}" for n in host.nics}
            m = self.start_host(host)
            self.write()
            try:
                t = self.ready_host(host)
                if self.topology.dcbx:
                    self.dcbx_after_restart(host)
            except DcblabError:
                self.hosts[name]["state"] = "gone"
                self.hosts[name]["rc"] = m.returncode
                self.write()
                raise
            self.write()
            return t

    # --- clients ----------------------------------------------------------------

    def serve(self):
        path = self.dir / SOCKET
        path.unlink(missing_ok=True)
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o077)
        try:
            srv.bind(str(path))
        finally:
            os.umask(old)
        srv.listen(64)
        threading.Thread(target=self._accept, args=(srv,),
                         daemon=True).start()
        return srv

    def _accept(self, srv):
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=self._client, args=(conn,),
                             daemon=True).start()

    def _client(self, conn):
        f = conn.makefile("rwb", buffering=0)
        try:
            for line in f:
                try:
                    req = json.loads(line)
                    reply = self.handle(req)
                except DcblabError as e:
                    reply = {"ok": False, "error": str(e),
                             "kind": type(e).__name__}
                except (ValueError, KeyError, TypeError) as e:
                    reply = {"ok": False, "error": f"bad request: {e!r}",
                             "kind": "UsageError"}
                f.write(json.dumps(reply).encode() + b"\n")
                if req.get("op") == "down" and reply.get("ok"):
                    self.stopped.wait()
                    f.write(b'{"ok": true, "stopped": true}\n')
                    return
        except OSError:
            pass
        finally:
            conn.close()

    def handle(self, req):
        op = req["op"]
        if op == "call":
            return {"ok": True, "return": self.call(req)}
        if op == "status":
            return {"ok": True, "status": self.status, "hosts": self.hosts,
                    "calls": self.calls,
                    "unplugged": sorted(self.unplugged)}
        if op == "restart":
            return {"ok": True, "timings": self.restart(req["host"])}
        if op == "set_link":  # a cable pulled or plugged (lab/faults.py)
            up = bool(req["up"])
            self.machines[req["host"]].set_link(req["nic"], up)
            end = f"{req['host']}:{req['nic']}"
            (self.unplugged.discard if up else self.unplugged.add)(end)
            return {"ok": True}
        if op == "disown":
            self.owner_pid = self.owner_start = None
            self.write()
            return {"ok": True}
        if op == "down":
            self.stopping.set()
            return {"ok": True}
        raise LabError(f"keeper: unknown op {op!r}")

    def call(self, req):
        name = req["host"]
        self.topology.host(name)  # one-line error naming the known hosts
        timeout = float(req.get("timeout", 10.0))
        lock = self.locks[name]
        if not lock.acquire(timeout=timeout):
            raise AgentTimeout(f"{name}: agent busy for {timeout}s")
        try:
            state = self.hosts.get(name, {}).get("state")
            if state != "running":
                raise LabError(self._not_running(name, state))
            self.calls[name] += 1
            return self.machines[name].agent.call(
                req["execute"], req.get("arguments"), timeout)
        finally:
            lock.release()

    def _not_running(self, name, state):
        if state == "gone":
            return (f"host {name} is gone (QEMU exited, rc "
                    f"{rc_text(self.hosts[name].get('rc'))}): see "
                    f"{self.hosts[name]['log']}; `dcblab restart {name}` "
                    "starts it again")
        return f"host {name} is {state or 'not started'}"


def _fresh_guest(m, snapshot):
    """A restored guest's CRNG reseeded from host randomness (it would
    otherwise draw what every other lab from that snapshot draws:
    tools/rngseed.c) and its wall clock set to the host's (it stopped
    when the snapshot was saved; its monotonic clock and timers carry
    on). Its kernel log (and so its new console) says where the restore
    happened."""
    m.agent.write_file("/dev/kmsg", f"<5>dcblab: restored from snapshot "
                       f"{snapshot['slot']} (key {snapshot['key']})\n")
    m.agent.run(["rngseed"], input=os.urandom(64))
    try:
        m.agent.call("guest-set-time", {"time": time.time_ns()})
    except AgentError as e:
        # qemu-ga sets the clock (settimeofday), then copies it to the
        # RTC with `hwclock -w`, which fails: the guests' kernel has no
        # RTC driver. The clock is set.
        if "hwclock failed" not in str(e):
            raise


def _watch_client(keeper, out, ready):
    """Until the lab is ready: when the `up` that asked for it is gone (a
    pipe's write end polls POLLERR once its reader closed: `up` killed,
    or a pytest session killed in a fixture's set-up) or a stop is asked
    for (SIGTERM: Ctrl-C in `up`), abort the bring-up at once rather than
    finish a lab nobody waits for."""
    poller = select.poll()
    poller.register(out.fileno(), select.POLLERR)
    while not ready.is_set():
        if keeper.stopping.is_set():
            break
        if poller.poll(100) and not ready.is_set():
            keeper.stop_reason = "the `up` that asked for it is gone"
            keeper.stopping.set()
            break
    else:
        return
    print(f"keeper: {keeper.stop_reason}: stopping the bring-up",
          file=sys.stderr, flush=True)
    keeper.abort_bringup()


def _keeper_main(args, out):
    """The keeper proper (child of the guard)."""
    ready = threading.Event()

    def tell(obj):
        try:
            out.write(json.dumps(obj) + "\n")
            out.flush()
            return True
        except OSError:
            return False  # `up` is gone: _watch_client stops the bring-up

    def say(msg):
        tell({"progress": msg})

    keeper = Keeper(args.name, args.backend, args.flavour, args.owner,
                    args.accel, cold=args.cold)
    keeper.source = args.source

    def on_signal(signum, frame):
        keeper.stop_reason = f"{signal.Signals(signum).name} received"
        keeper.stopping.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # The guard dies: stop the lab (it can no longer reap for us).
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    watcher = threading.Thread(target=_watch_client, args=(keeper, out, ready),
                               daemon=True)
    watcher.start()
    srv = None
    try:
        timings = keeper.up(say)
        srv = keeper.serve()
        # Set before the line goes out: `up` exits once it has read it.
        ready.set()
        keeper._check_stopping()
        if not tell({"ready": {"run_id": keeper.run_id, "timings": timings}}):
            raise LabError(f"lab {keeper.name}: the `up` that asked for it "
                           "is gone")
        # Nobody reads our stdout any more: our log takes it.
        os.dup2(sys.stderr.fileno(), 1)
        keeper.watch()
        return 0
    except BaseException as e:
        ready.set()
        msg = str(e) if isinstance(e, DcblabError) else \
            "".join(traceback.format_exception_only(type(e), e)).strip()
        tell({"error": msg or type(e).__name__})
        print(f"keeper: {msg}", file=sys.stderr, flush=True)
        return 1
    finally:
        if srv is not None:
            srv.close()
        keeper.down()
        keeper.stopped.set()
        time.sleep(0.05)  # let a waiting `down` client read "stopped"


def _guard(args):
    """Fork the keeper; reap everything; tear down if the keeper is killed.
    """
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        return _keeper_main(args, sys.stdout)
    # Only the keeper talks on the `up` client's pipe: let it see EOF when
    # the keeper dies.
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    rc = 0
    while True:
        try:
            wpid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return rc
        except InterruptedError:
            continue
        if wpid != pid:
            continue
        rc = os.waitstatus_to_exitcode(status)
        if os.WIFSIGNALED(status):
            print(f"keeper guard: keeper {pid} killed by signal "
                  f"{os.WTERMSIG(status)}: tearing the run down",
                  file=sys.stderr, flush=True)
            try:
                st = read_state(args.name)
            except DcblabError:
                st = {}  # killed before it wrote state.json: nothing ran
            try:
                teardown(st.get("run_id"), st.get("netns"),
                         lab_dir(args.name),
                         say=lambda m: print(f"keeper guard: {m}",
                                             file=sys.stderr, flush=True))
            except OSError as e:
                print(f"keeper guard: {e}", file=sys.stderr, flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m dcblab.lab.keeper")
    ap.add_argument("name")
    ap.add_argument("--backend", default=backends.DEFAULT,
                    choices=backends.names())
    ap.add_argument("--flavour")
    ap.add_argument("--owner", type=int)
    ap.add_argument("--accel")
    ap.add_argument("--source", help="the topology file `up` was given")
    ap.add_argument("--cold", action="store_true",
                    help="boot every guest: no snapshot used or saved")
    return _guard(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
