"""Removing what dead labs left behind, by run id only.

A lab's processes carry ``dcblab.run=<id>`` on their command line, its
network namespace is bound on a file in its run directory, and its owners
hold the run directory's lock (runs.py). The reaper removes the run
directories nobody holds (a lab whose keeper and guard died, or an `up`
killed before its keeper started), killing the processes of the run id
their state.json names and unbinding their namespace; then the
namespaces older versions named in /run/netns (``dcblab-LAB``, carrying
the run id as the alias of their ``lo``) whose run no live lab claims. It
touches nothing else.
"""

import json
import shutil
from pathlib import Path

from ..core import proc
from ..core.errors import DcblabError
from . import splitwire, wire
from .runs import (TOPOLOGY, lab_dir, load_lab_topology, owned,
                   remove_run_root, run_dirs, run_tag)

__all__ = ["run_tag", "run_pids", "teardown", "reap", "leftovers"]


def run_pids(run_id):
    """Host pids of processes carrying this run id."""
    return proc.pids_with_tag(run_tag(run_id))


def teardown(run_id, netns, rundir, say=lambda msg: None):
    """Kill the run's processes, unbind its network namespace, remove its
    run directory (and the run root if it was the last). Each step runs
    whatever the others did."""
    if rundir and run_id:
        _remote_parts(run_id, Path(rundir), say)
    pids = run_pids(run_id) if run_id else []
    if pids:
        proc.kill(pids)
        say(f"killed {len(pids)} process(es) of run {run_id}")
    if rundir:
        netns = netns or str(Path(rundir) / wire.NETNS_FILE)
    if netns:
        try:
            if wire.netns_exists(netns):
                wire.delete_netns(netns)
                say(f"removed netns {netns}")
        except OSError as e:
            say(f"netns {netns}: {e}")
    if rundir and Path(rundir).exists():
        shutil.rmtree(rundir, ignore_errors=True)
        say(f"removed {rundir}")
    remove_run_root()


def _remote_parts(run_id, rundir, say):
    """A lab split across machines: each other machine's part, through
    ssh (splitwire.remote_teardown); an unreachable machine is a line
    said, and the rest goes on."""
    st = _state(rundir)
    if not st.get("split"):
        return
    try:
        topo = load_lab_topology(rundir.name, rundir / TOPOLOGY)
        splitwire.remote_teardown(topo, rundir.name, run_id, say,
                                  st.get("ssh_config"))
    except DcblabError as e:
        say(f"lab {rundir.name}: {e}")


def leftovers(name, run_id):
    """What of lab NAME / run RUN_ID is still there (empty after a down)."""
    left = []
    pids = run_pids(run_id)
    if pids:
        left.append(f"processes {pids}")
    if wire.netns_exists(wire.netns_path(name)):
        left.append(f"netns {wire.netns_path(name)}")
    if lab_dir(name).exists():
        left.append(f"run dir {lab_dir(name)}")
    return left


def _state(rundir):
    try:
        return json.loads((rundir / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def reap(say=print):
    """Remove what dead labs left behind; returns the run ids reaped (a
    run directory without state.json counts as run "-")."""
    reaped, live = [], set()
    for d in run_dirs():
        st = _state(d)
        if owned(d):
            if st.get("run_id"):
                live.add(st["run_id"])
            continue
        rid = st.get("run_id")
        if rid:
            say(f"lab {d.name}: its keeper is gone, reaping run {rid}")
        else:
            say(f"lab {d.name}: left by an `up` that died before its keeper "
                "started, removing it")
        teardown(rid, st.get("netns"), d, say)
        reaped.append(rid or "-")
    for name in wire.named_netns():
        rid = wire.netns_run_id(f"{wire.NAMED_NETNS_DIR}/{name}")
        if rid and rid not in live:
            say(f"netns {name}: run {rid} has no live lab, reaping")
            pids = run_pids(rid)
            if pids:
                proc.kill(pids)
            wire.delete_named_netns(name)
            reaped.append(rid)
    remove_run_root()
    return reaped
