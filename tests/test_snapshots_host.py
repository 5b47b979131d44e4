"""lab/snapshots.py on the host: the key, what find() says when a
snapshot does not fit, save()'s one instant and its cleanup, listing and
removal. Machines are stand-ins that record what they were asked; the
guest side (a lab restored from its snapshot) is tests/test_snapshots.py.
"""

import json
import os
import subprocess
import sys

import pytest

from dcblab.backends import VmError
from dcblab.lab import snapshots


@pytest.fixture
def build(tmp_path, monkeypatch):
    """BUILD in tmp_path, with a kernel and initramfs of a few bytes, and
    a fixed host TSC."""
    monkeypatch.setenv("BUILD", str(tmp_path))
    monkeypatch.setattr(snapshots, "tsc_khz", lambda: 2_600_000)
    (tmp_path / "bzImage").write_bytes(b"kernel 1")
    (tmp_path / "initramfs.cpio").write_bytes(b"image 1")
    return tmp_path


def _key(build, **over):
    args = dict(topology_bytes=b"name = 'x'\n", backend="qemu",
                flavour="lab", accel="tcg",
                identities={"h1": ["qemu", "-m", "128"],
                            "h2": ["qemu", "-m", "128"]},
                kernel=build / "bzImage", initrd=build / "initramfs.cpio")
    args.update(over)
    return snapshots.make_key(**args)


class FakeVm:
    def __init__(self, log, name, fail=False):
        self.log, self.name, self.fail = log, name, fail

    def pause(self):
        self.log.append(("pause", self.name))

    def save(self, path):
        self.log.append(("save", self.name))
        if self.fail:
            raise VmError(f"{self.name}: saving its state failed: disk full")
        path.write_bytes(f"state of {self.name}".encode())

    def resume(self):
        self.log.append(("resume", self.name))


def _save(build, key, parts, fail=()):
    log = []
    vms = {h: FakeVm(log, h, h in fail) for h in ("h1", "h2")}
    snap, _ = snapshots.save("x-qemu-lab", key, parts, vms, mac_seed="lab1",
                             lab="lab1", topology="/t/x.toml")
    return snap, log


def test_the_key_holds_for_the_same_inputs_and_moves_with_each_one(build):
    key, parts = _key(build)
    assert _key(build)[0] == key
    others = [_key(build, topology_bytes=b"name = 'y'\n")[0],
              _key(build, accel="kvm")[0], _key(build, flavour="debug")[0],
              _key(build, identities={"h1": ["qemu", "-m", "256"],
                                      "h2": ["qemu", "-m", "128"]})[0]]
    (build / "bzImage").write_bytes(b"kernel 2")
    others.append(_key(build)[0])
    (build / "bzImage").write_bytes(b"kernel 1")
    (build / "initramfs.cpio").write_bytes(b"image 2")
    others.append(_key(build)[0])
    assert key not in others and len(set(others)) == len(others)
    assert parts["guests"].keys() == {"h1", "h2"}


def test_find_says_why_there_is_no_snapshot_to_restore(build):
    key, parts = _key(build)
    snap, why = snapshots.find("x-qemu-lab", key, parts, ["h1", "h2"])
    assert snap is None and why == "none saved yet"
    _save(build, key, parts)
    (build / "bzImage").write_bytes(b"kernel 2")
    key2, parts2 = _key(build, accel="kvm")
    snap, why = snapshots.find("x-qemu-lab", key2, parts2, ["h1", "h2"])
    assert snap is None
    assert why == "accel, kernel changed since it was saved"


def test_a_snapshot_from_a_host_with_another_tsc_is_not_restored(
        build, monkeypatch):
    key, parts = _key(build)
    _save(build, key, parts)
    monkeypatch.setattr(snapshots, "tsc_khz", lambda: 2_600_000 + 200)
    snap, why = snapshots.find("x-qemu-lab", key, parts, ["h1", "h2"])
    assert snap is None
    assert why == ("its guests calibrated their clock for a TSC of 2600000 "
                   "kHz, this host's runs at 2600200 kHz")
    # a drift within TSC_TOLERANCE (what two measurements differ by)
    monkeypatch.setattr(snapshots, "tsc_khz", lambda: 2_600_000 + 100)
    snap, why = snapshots.find("x-qemu-lab", key, parts, ["h1", "h2"])
    assert why is None
    assert {h: f.read() for h, f in snap.files.items()} == \
        {"h1": b"state of h1", "h2": b"state of h2"}
    for f in snap.files.values():
        f.close()


def test_save_pauses_every_guest_before_saving_any_and_resumes_all(build):
    key, parts = _key(build)
    snap, log = _save(build, key, parts)
    assert log[:2] == [("pause", "h1"), ("pause", "h2")]
    assert sorted(log[2:4]) == [("save", "h1"), ("save", "h2")]
    assert log[4:] == [("resume", "h1"), ("resume", "h2")]
    meta = json.loads((snap.dir / "meta.json").read_text())
    assert (meta["key"], meta["mac_seed"], meta["hosts"], meta["tsc_khz"]) \
        == (key, "lab1", ["h1", "h2"], 2_600_000)


def test_a_failed_save_resumes_the_guests_and_keeps_the_old_snapshot(
        build):
    key, parts = _key(build)
    old, _ = _save(build, key, parts)
    with pytest.raises(VmError, match="h2: saving its state failed"):
        _save(build, "newkey", parts, fail=("h2",))
    snap = snapshots.find("x-qemu-lab", key, parts, ["h1", "h2"])[0]
    for f in snap.files.values():
        f.close()
    assert snap.key == key
    log = []
    vms = {h: FakeVm(log, h, h == "h2") for h in ("h1", "h2")}
    with pytest.raises(VmError):
        snapshots.save("x-qemu-lab", "k", parts, vms, mac_seed="l",
                       lab="l", topology="t")
    assert [e for e in log if e[0] == "resume"] == [("resume", "h1"),
                                                    ("resume", "h2")]
    assert [p.name for p in snapshots.store().iterdir()
            if p.name != ".lock"] == ["x-qemu-lab"]


def test_listing_and_removal(build):
    key, parts = _key(build)
    assert snapshots.listing() == []
    _save(build, key, parts)
    (row,) = snapshots.listing()
    assert (row["name"], row["key"], row["hosts"], row["lab"]) == \
        ("x-qemu-lab", key, ["h1", "h2"], "lab1")
    assert row["bytes"] > len(b"state of h1") * 2
    with pytest.raises(snapshots.SnapshotError,
                       match="no snapshot named 'nope' \\(saved: "
                             "x-qemu-lab\\)"):
        snapshots.remove(["nope"])
    assert snapshots.remove(["x-qemu-lab"]) == ["x-qemu-lab"]
    assert snapshots.listing() == []


def test_remove_all_takes_what_a_killed_save_left_not_a_running_one(
        build):
    key, parts = _key(build)
    _save(build, key, parts)
    root = snapshots.store()
    dead = subprocess.run([sys.executable, "-c", "import os; "
                           "print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (root / f".x-qemu-lab.tmp-{dead}").mkdir()
    live = root / f".y-qemu-lab.tmp-{os.getpid()}"
    live.mkdir()
    assert snapshots.remove() == ["x-qemu-lab"]
    assert sorted(p.name for p in root.iterdir()) == [".lock", live.name]


def test_snapshots_env_switch(monkeypatch):
    for v, on in (("on", True), ("", True), ("off", False), ("0", False)):
        monkeypatch.setenv(snapshots.ENV, v)
        assert snapshots.enabled() is on
    monkeypatch.setenv(snapshots.ENV, "maybe")
    with pytest.raises(Exception, match="DCBLAB_SNAPSHOTS='maybe': use on "
                                        "or off"):
        snapshots.enabled()


def test_a_save_beyond_max_snapshots_removes_the_least_recently_used(
        build, monkeypatch):
    monkeypatch.setattr(snapshots, "MAX_SNAPSHOTS", 2)
    key, parts = _key(build)
    vms = {h: FakeVm([], h) for h in ("h1", "h2")}
    for slot in ("a", "b"):
        snapshots.save(slot, key, parts, vms, mac_seed="l", lab="l",
                       topology="t")
        os.utime(snapshots.store() / slot / "meta.json", (1, 1))
    snap, _ = snapshots.find("a", key, parts, ["h1"])   # a used: b is older
    snap.files["h1"].close()
    snapshots.save("c", key, parts, vms, mac_seed="l", lab="l",
                   topology="t")
    assert sorted(r["name"] for r in snapshots.listing()) == ["a", "c"]


def _cli(build, *args):
    return subprocess.run([sys.executable, "bin/dcblab", "snapshots", *args],
                          capture_output=True, text=True,
                          env=dict(os.environ, BUILD=str(build)),
                          cwd=os.path.dirname(os.path.dirname(__file__)))


def test_the_snapshots_command_lists_and_removes(build):
    r = _cli(build)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.startswith("no snapshots in ")
    key, parts = _key(build)
    _save(build, key, parts)
    r = _cli(build, "-j")
    doc = json.loads(r.stdout)
    assert [(s["name"], s["key"]) for s in doc["snapshots"]] == \
        [("x-qemu-lab", key)]
    r = _cli(build)
    assert r.stdout.splitlines()[1].split()[:3] == ["x-qemu-lab", key, "2"]
    r = _cli(build, "rm")
    assert r.returncode == 1
    assert r.stderr == ("dcblab: snapshots rm: name the snapshots to "
                        "remove, or --all\n")
    r = _cli(build, "rm", "nope")
    assert r.returncode == 1
    assert r.stderr == ("dcblab: no snapshot named 'nope' (saved: "
                        "x-qemu-lab)\n")
    r = _cli(build, "rm", "--all", "-j")
    assert json.loads(r.stdout) == {"removed": ["x-qemu-lab"]}
