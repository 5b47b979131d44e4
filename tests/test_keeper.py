"""The lab keeper: a lab started by `dcblab up` outlives it, can be stopped
whatever happened to its topology file, survives its `up` being killed,
cleans up when the keeper itself is killed, and leaves no zombie QEMU on
any of these paths (PID 1 on this machine never reaps)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dcblab.core.paths import ROOT, default_topology
from dcblab.core.proc import SIGINT_DEFAULT
from dcblab.lab import leftovers, run_root

DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]


def _dcblab(args, cwd=None, timeout=120, **kw):
    return subprocess.run(DCBLAB + args, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, stdin=subprocess.DEVNULL,
                          **kw)


def _state(name):
    try:
        return json.loads((run_root() / name / "state.json").read_text())
    except (OSError, ValueError):
        return None


def _wait(cond, timeout=90, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _proc_state(pid):
    """'Z' for a zombie, None if there is no such process any more."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _no_zombie(pids):
    return [p for p in pids if _proc_state(p) == "Z"] == []


def _qemu_pids(state):
    return [h["pid"] for h in state["hosts"].values() if h.get("pid")]


@pytest.fixture
def name(request):
    n = f"k{os.getpid() % 100000}-{request.node.name[5:12]}".lower()
    n = "".join(c if c.isalnum() or c == "-" else "-" for c in n)[:16]
    yield n
    st = _state(n)
    if st is not None:
        _dcblab(["down", "--name", n])


def test_empty_lab_name_is_refused():
    r = _dcblab(["up", "--name", ""])
    assert r.returncode == 2
    assert r.stderr.startswith("dcblab: lab name '' must match")


def test_a_lab_through_its_life(name, tmp_path):
    """One lab (each boot costs seconds): `up -j` from another directory,
    the topology file edited and deleted, a guest killed and restarted,
    and at last the keeper killed outright."""
    topo = tmp_path / "one.toml"
    shutil.copy(default_topology(), topo)
    r = _dcblab(["up", "-j", "one.toml", "--name", name], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # the whole of stdout is one JSON document
    assert doc["name"] == name and doc["timings"]["total"] > 0
    assert "(2 hosts, 1 link)" in r.stderr and "1 links" not in r.stderr
    st = _state(name)
    assert (st["status"], st["owner_pid"], st["source"]) == \
        ("up", None, str(topo))
    # The keeper outlives `up` and is its QEMUs' parent; libvirtd
    # daemonises QEMU, and the orphan goes to the keeper's guard, a child
    # subreaper.
    parent = st["keeper_pid"] if st["backend"] == "qemu" else \
        st["guard_pid"]
    for pid in _qemu_pids(st):
        stat = Path(f"/proc/{pid}/stat").read_text()
        assert int(stat.rsplit(")", 1)[1].split()[1]) == parent

    # Everything after `up` reads the lab's copy of the topology.
    topo.write_text(topo.read_text() + "\nnew_key = 1\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = _dcblab(["status"], cwd=elsewhere)
    assert r.returncode == 0 and f"lab {name} " in r.stdout, r.stderr
    topo.unlink()
    r = _dcblab(["exec", "--name", name, "h1", "--", "hostname"],
                cwd=elsewhere)
    assert (r.returncode, r.stdout) == (0, "h1\n"), r.stderr

    # A guest dies: status says so, with its log; restart brings it back.
    h2 = st["hosts"]["h2"]["pid"]
    os.kill(h2, signal.SIGKILL)
    _wait(lambda: _state(name)["hosts"]["h2"]["state"] == "gone", 10,
          "the keeper to notice h2 died")
    assert _no_zombie([h2])  # the keeper reaped it
    r = _dcblab(["status", "--name", name])
    assert r.returncode == 0, r.stderr
    rc = -9 if st["backend"] == "qemu" else "unknown"
    assert f"h2 is gone (QEMU rc {rc})" in r.stdout
    assert st["hosts"]["h2"]["log"] in r.stdout
    assert f"dcblab restart --name {name} h2" in r.stdout
    console = Path(st["hosts"]["h2"]["rundir"]) / "console.log"
    last = console.read_text(errors="replace").strip().splitlines()[-1]
    assert f"    {last.strip()}" in r.stdout  # its console's last lines
    r = _dcblab(["exec", "--name", name, "h2", "--", "true"])
    assert r.returncode == 1
    assert r.stderr.startswith("dcblab: host h2 is gone (QEMU exited")
    r = _dcblab(["exec", "--name", name, "h1", "--", "true"])
    assert r.returncode == 0, r.stderr
    r = _dcblab(["restart", "--name", name, "h2"])
    assert r.returncode == 0, r.stderr
    assert "baseline applied" in r.stdout
    new = _state(name)["hosts"]["h2"]
    assert new["state"] == "running" and new["pid"] != h2
    r = _dcblab(["exec", "--name", name, "h1", "--", "ping", "-c", "2",
                 "-W", "2", "198.51.100.2"])
    assert r.returncode == 0, r.stdout + r.stderr

    # The keeper killed outright: its guard adopts the QEMUs, tears the
    # run down and reaps them; reap then finds nothing left.
    st = _state(name)
    qemus = _qemu_pids(st)
    os.kill(st["keeper_pid"], signal.SIGKILL)
    _wait(lambda: leftovers(name, st["run_id"]) == [], 60,
          "the keeper's guard to tear the run down")
    r = _dcblab(["reap"])
    assert r.returncode == 0, r.stderr
    assert leftovers(name, st["run_id"]) == []
    _wait(lambda: _no_zombie(qemus), 10, "the QEMUs to be reaped")


def test_kill_9_of_up_while_starting_removes_the_lab(name):
    """`up` killed (SIGKILL, no chance to say anything) once the QEMUs
    run: the keeper sees its client gone before the lab was ready and
    removes it by itself, without `dcblab reap`, and never says it is
    up."""
    up = subprocess.Popen(DCBLAB + ["up", "--name", name],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        st = _wait(lambda: (s := _state(name)) and s["hosts"] and s, 60,
                   "QEMUs recorded")
    finally:
        up.send_signal(signal.SIGKILL)
        up.wait()
    qemus = _qemu_pids(st)
    seen = []

    def gone():
        seen.append((_state(name) or {}).get("status"))
        return leftovers(name, st["run_id"]) == []
    _wait(gone, 60, "the keeper to remove the lab")
    assert "up" not in seen
    assert _no_zombie(qemus)


def test_double_ctrl_c_during_up_still_removes_everything(name):
    up = subprocess.Popen([*SIGINT_DEFAULT, *DCBLAB, "up", "--name", name],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    st = _wait(lambda: (s := _state(name)) and s["hosts"] and s, 60,
               "QEMUs recorded")
    up.send_signal(signal.SIGINT)
    time.sleep(0.2)
    up.send_signal(signal.SIGINT)
    _, err = up.communicate(timeout=60)
    assert up.returncode == 130
    assert "interrupted: stopping lab" in err
    assert "Traceback" not in err
    # Whatever `up` saw, the keeper removes the lab.
    _wait(lambda: leftovers(name, st["run_id"]) == [], 90,
          "the keeper to remove the lab")
    assert _no_zombie(_qemu_pids(st))


