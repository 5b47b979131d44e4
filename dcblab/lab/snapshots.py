"""Labs from snapshots: every guest of a lab saved at one instant, ready,
and restored by later ``up``s of the same lab instead of booted.

A snapshot lives in BUILD/snapshots/SLOT/ (SLOT: topology name, backend,
flavour, and $DCBLAB_KERNEL's path when that is another kernel than the
flavour's, slot_name; one snapshot per slot): ``meta.json`` and one saved state per
guest (QEMU's migration stream; on the libvirt backend libvirt's save
image, which holds one). It is used only while its key still
holds: the key is a digest of everything that makes a saved guest wrong
for a new one (the format, the backend and flavour, the accelerator,
QEMU's version and binary, the kernel's and initramfs's bytes, the
topology file's bytes, and each guest's machine: QEMU's argv, or the
libvirt domain XML, with its run-specific parts replaced,
Backend.identity). Beside the key, the
host's TSC frequency must match the one the guests calibrated against
(within TSC_TOLERANCE). A key that no longer holds means a cold boot,
whose lab then replaces the snapshot; ``--cold`` neither uses nor saves
one.

What a restored lab keeps from the lab that saved it: its guests'
memory (baseline, lldpad and its DCBX state, rxe devices) and their
MACs (Wire.mac_seed: the saving lab's name). What is new: the wire
(netns, taps), the QEMU processes and their sockets and logs, the run
id. The guests' clocks stopped while saved (QEMU's virtual TSC
stops with the vCPUs), so timers carry on where they were; the keeper
sets each guest's wall clock and stirs fresh host randomness into its
pool after the restore.

Nothing here runs outside BUILD: a snapshot is written to a temporary
directory beside its slot and renamed into place under a lock, so a
lab restoring from the old one keeps the files it opened.
"""

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..core import paths, proc
from ..core.errors import DcblabError
from .runs import LabError

__all__ = ["FORMAT", "Snapshot", "SnapshotError", "store", "slot_name",
           "make_key", "find", "save", "listing", "remove", "tsc_khz",
           "enabled", "ENV"]

FORMAT = 1
META = "meta.json"
STATE = "{host}.state"
# The host TSC's frequency, measured by each keeper (build/tools/tsc-khz),
# varied by ~10 kHz in 2.6 GHz between runs; a guest restored on a host
# whose TSC runs faster or slower than the one it calibrated against
# keeps time that much off: 0.005% (130 kHz here) is 4 s a day.
TSC_TOLERANCE = 5e-5
# DCBLAB_SNAPSHOTS=off: every lab boots cold and saves nothing (as --cold).
ENV = "DCBLAB_SNAPSHOTS"
# Snapshots kept: a save removes the least recently used beyond these (a
# test's one-off topology would otherwise leave one per run; the suite's
# own use two or three per kernel flavour, 180-600 MB each).
MAX_SNAPSHOTS = 8


class SnapshotError(LabError):
    """A snapshot could not be saved, read or removed."""


def enabled():
    """Whether labs use snapshots unless told --cold (DCBLAB_SNAPSHOTS)."""
    v = os.environ.get(ENV, "on").strip().lower()
    if v in ("on", "1", "yes", ""):
        return True
    if v in ("off", "0", "no"):
        return False
    raise DcblabError(f"{ENV}={v!r}: use on or off")


def store() -> Path:
    return paths.build_dir() / "snapshots"


def slot_name(topology_name, backend, flavour):
    """topology-backend-flavour; with $DCBLAB_KERNEL another kernel than
    the flavour's, a slot of that kernel's own (-kHASH of its path): its
    labs, booting cold against the flavour's snapshot, would otherwise
    replace it, and the next lab on the flavour's kernel boot cold too."""
    slot = f"{topology_name}-{backend}-{flavour}"
    kernel = paths.boot_kernel(flavour)
    if kernel.resolve() == paths.bzimage(flavour).resolve():
        return slot
    return f"{slot}-k{hashlib.sha256(str(kernel).encode()).hexdigest()[:8]}"


def tsc_khz():
    """The host TSC's kHz the guests are told (tsc_early_khz), or None."""
    from ..backends.qemu import tsc_cmdline
    for w in tsc_cmdline():
        if w.startswith("tsc_early_khz="):
            return int(w.split("=", 1)[1])
    return None


def _digest_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@functools.cache
def _qemu():
    """QEMU's version line and its binary's size and mtime."""
    from ..backends.qemu import QEMU
    exe = shutil.which(QEMU)
    if exe is None:
        return "missing"
    out = subprocess.run([exe, "--version"], capture_output=True, text=True,
                         timeout=10).stdout.splitlines()
    st = os.stat(exe)
    return f"{out[0] if out else '?'}; {exe} {st.st_size} {st.st_mtime_ns}"


def make_key(*, topology_bytes, backend, flavour, accel, identities, kernel,
             initrd):
    """(digest, parts): the snapshot key of a lab, and what went into it
    (the parts name what changed when a key no longer holds)."""
    parts = {
        "format": FORMAT, "backend": backend, "flavour": flavour,
        "accel": accel, "qemu": _qemu(),
        "kernel": _digest_file(kernel), "initramfs": _digest_file(initrd),
        "topology": hashlib.sha256(topology_bytes).hexdigest(),
        "guests": {h: hashlib.sha256(json.dumps(i).encode()).hexdigest()
                   for h, i in sorted(identities.items())}}
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True)
                            .encode()).hexdigest()[:16]
    return digest, parts


@dataclass
class Snapshot:
    """A saved lab: its directory and meta.json."""
    dir: Path
    meta: dict
    files: dict = None        # find(): {host: its state, open}

    @property
    def name(self):
        return self.dir.name

    @property
    def key(self):
        return self.meta["key"]

    def state_file(self, host):
        return self.dir / STATE.format(host=host)

    def size(self):
        return sum(p.stat().st_size for p in self.dir.iterdir()
                   if p.is_file())


@contextlib.contextmanager
def _locked(shared=False):
    store().mkdir(parents=True, exist_ok=True)
    with open(store() / ".lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _read(slot_dir):
    try:
        meta = json.loads((slot_dir / META).read_text())
    except (OSError, ValueError):
        return None
    return Snapshot(slot_dir, meta)


def _changed(old, new):
    """What differs between two keys' parts, in words."""
    words = []
    for k in ("format", "backend", "flavour", "accel", "qemu", "kernel",
              "initramfs", "topology"):
        if old.get(k) != new.get(k):
            words.append(k)
    og, ng = old.get("guests", {}), new.get("guests", {})
    if set(og) != set(ng):
        words.append("the set of guests")
    else:
        words += [f"{h}'s machine" for h in sorted(ng) if og[h] != ng[h]]
    return ", ".join(words) or "its key"


def find(slot, key, parts, hosts):
    """(snapshot, None) if slot holds a usable snapshot of key, with an
    open file for each host's state in snapshot.files; else (None, why
    not, in words)."""
    with _locked(shared=True):
        snap = _read(store() / slot)
        if snap is None:
            return None, "none saved yet"
        if snap.meta.get("format") != FORMAT or snap.key != key:
            return None, (f"{_changed(snap.meta.get('parts', {}), parts)} "
                          "changed since it was saved")
        khz, saved = tsc_khz(), snap.meta.get("tsc_khz")
        if saved and (not khz or abs(khz - saved) > TSC_TOLERANCE * saved):
            return None, (f"its guests calibrated their clock for a TSC of "
                          f"{saved} kHz, this host's runs at {khz} kHz")
        try:
            snap.files = {h: open(snap.state_file(h), "rb") for h in hosts}
        except OSError as e:
            return None, f"its state files are unreadable: {e}"
        # used: the last to go when MAX_SNAPSHOTS are exceeded
        os.utime(snap.dir / META)
    return snap, None


def save(slot, key, parts, machines, *, mac_seed, lab, topology):
    """Pause every machine (in turn, within milliseconds: the lab's one
    instant), save them all in parallel, resume them all; then the
    snapshot replaces the slot's. Returns (snapshot, seconds paused).
    The guests are resumed on every path."""
    root = store()
    root.mkdir(parents=True, exist_ok=True)
    with _locked():
        _remove_dead_saves(root)
    tmp = root / f".{slot}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(mode=0o700)
    paused = []
    t0 = time.monotonic()
    try:
        for name, m in machines.items():
            m.pause()
            paused.append(m)
        with ThreadPoolExecutor(max_workers=len(machines)) as pool:
            futs = [pool.submit(m.save, tmp / STATE.format(host=name))
                    for name, m in machines.items()]
            for f in futs:
                f.result()
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        errors = []
        for m in paused:
            try:
                m.resume()
            except DcblabError as e:
                errors.append(str(e))
        t_paused = time.monotonic() - t0
        if errors:
            shutil.rmtree(tmp, ignore_errors=True)
            raise SnapshotError("; ".join(errors))
    meta = {"format": FORMAT, "key": key, "parts": parts, "slot": slot,
            "created": time.time(), "lab": lab, "mac_seed": mac_seed,
            "topology": topology, "tsc_khz": tsc_khz(),
            "hosts": sorted(machines), "save_s": round(t_paused, 3)}
    (tmp / META).write_text(json.dumps(meta, indent=1) + "\n")
    with _locked():
        dest = root / slot
        old = root / f".{slot}.old-{os.getpid()}"
        if dest.exists():
            dest.rename(old)
        tmp.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
        _evict(root)
    return Snapshot(dest, meta), t_paused


def _evict(root):
    """The least recently used snapshots beyond MAX_SNAPSHOTS removed."""
    slots = [d for d in root.iterdir()
             if d.is_dir() and not d.name.startswith(".")]

    def used(d):
        try:
            return (d / META).stat().st_mtime
        except OSError:
            return 0.0
    for d in sorted(slots, key=used)[:max(0, len(slots) - MAX_SNAPSHOTS)]:
        shutil.rmtree(d, ignore_errors=True)


def _remove_dead_saves(root):
    """What saves killed half-way left (not a running one's)."""
    for d in root.iterdir():
        pid = d.name.rpartition("-")[2]
        if d.is_dir() and d.name.startswith(".") and \
                not (pid.isdigit() and proc.running(int(pid))):
            shutil.rmtree(d, ignore_errors=True)


def listing():
    """Every snapshot, oldest first: dicts for `dcblab snapshots`."""
    root = store()
    out = []
    if not root.is_dir():
        return out
    with _locked(shared=True):
        for d in sorted(root.iterdir()):
            if d.name.startswith(".") or not d.is_dir():
                continue
            snap = _read(d)
            if snap is None:
                out.append({"name": d.name, "broken": True})
                continue
            out.append({"name": d.name, "key": snap.key,
                        "created": snap.meta.get("created"),
                        "topology": snap.meta.get("topology"),
                        "lab": snap.meta.get("lab"),
                        "hosts": snap.meta.get("hosts", []),
                        "bytes": snap.size(),
                        "save_s": snap.meta.get("save_s")})
    return sorted(out, key=lambda e: e.get("created") or 0)


def remove(names=None):
    """Remove the named snapshots (all when names is None), and what a
    killed save left; returns the names removed. One line for a name
    that is not there."""
    root = store()
    if not root.is_dir():
        if names:
            raise SnapshotError(f"no snapshot named {names[0]!r} (none "
                                "saved)")
        return []
    with _locked():
        present = sorted(d.name for d in root.iterdir()
                         if d.is_dir() and not d.name.startswith("."))
        if names is None:
            names = present
            _remove_dead_saves(root)
        unknown = [n for n in names if n not in present]
        if unknown:
            raise SnapshotError(f"no snapshot named {unknown[0]!r} (saved: "
                                f"{', '.join(present) or 'none'})")
        for n in names:
            shutil.rmtree(root / n)
    return list(names)
