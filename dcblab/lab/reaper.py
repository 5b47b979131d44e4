"""Removing what dead labs left behind, by run id only.

A lab's processes carry ``dcblab.run=<id>`` on their command line and its
netns carries ``dcblab-run:<id>`` as the alias of its ``lo``: the reaper
removes labs whose keeper died (a keeper stops its lab itself when the
lab's owner dies), and namespaces or processes carrying a run id that no
live lab claims. It touches nothing else.
"""

import json
import shutil
from pathlib import Path

from ..core import proc
from . import wire
from .runs import keeper_alive, lab_dir, list_labs, run_root

__all__ = ["run_tag", "run_pids", "teardown", "reap", "leftovers"]


def run_tag(run_id):
    """The word every guest process of run ``run_id`` has on its argv."""
    return f"dcblab.run={run_id}"


def run_pids(run_id):
    """Host pids of processes carrying this run id."""
    return proc.pids_with_tag(run_tag(run_id))


def teardown(run_id, netns, rundir, say=lambda msg: None):
    """Kill the run's processes, delete its netns (if it carries the run
    id) and its run directory."""
    pids = run_pids(run_id) if run_id else []
    if pids:
        proc.kill(pids)
        say(f"killed {len(pids)} process(es) of run {run_id}")
    # netns_run_id() is None for a namespace that does not exist.
    if netns and run_id and wire.netns_run_id(netns) == run_id:
        wire.delete_netns(netns)
        say(f"removed netns {netns}")
    if rundir and Path(rundir).exists():
        shutil.rmtree(rundir, ignore_errors=True)
        say(f"removed {rundir}")


def leftovers(name, run_id):
    """What of lab NAME / run RUN_ID is still there (empty after a down)."""
    left = []
    pids = run_pids(run_id)
    if pids:
        left.append(f"processes {pids}")
    if wire.netns_name(name) in wire.list_netns():
        left.append(f"netns {wire.netns_name(name)}")
    if lab_dir(name).exists():
        left.append(f"run dir {lab_dir(name)}")
    return left


def reap(say=print):
    """Remove what dead labs left behind; returns the run ids reaped."""
    reaped, live = [], set()
    for name in list_labs():
        d = run_root() / name
        try:
            st = json.loads((d / "state.json").read_text())
        except (OSError, ValueError):
            continue
        if not keeper_alive(st):
            say(f"lab {name}: keeper gone, reaping run {st['run_id']}")
            teardown(st["run_id"], st.get("netns"), d, say)
            reaped.append(st["run_id"])
        else:
            live.add(st["run_id"])
    for ns in wire.list_netns():
        if not ns.startswith("dcblab-"):
            continue
        rid = wire.netns_run_id(ns)
        if rid and rid not in live:
            say(f"netns {ns}: run {rid} has no live lab, reaping")
            teardown(rid, ns, None, say)
            reaped.append(rid)
    return reaped
