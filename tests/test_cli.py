"""bin/dcblab as a user meets it: every mistake is one line on stderr,
never a traceback; exit 2 for a usage mistake, a name that names nothing
included (a lab, host, link), 1 when there is no lab to pick one from;
status works on a lab another process owns."""

import json
import os
import subprocess
import sys

import pytest

from dcblab.core.paths import ROOT

DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]


def _dcblab(args, env=None, timeout=60):
    return subprocess.run(DCBLAB + args, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def _one_line(r):
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("dcblab: ") and r.stderr.count("\n") == 1, \
        r.stderr
    return r.stderr


# With an empty run root, no lab is up whatever else runs on the machine.
@pytest.mark.parametrize("args, rc, text", [
    (["status", "--name", "nosuch"], 2, "no lab named 'nosuch' is up"),
    (["down", "--name", "nosuch"], 2, "no lab named 'nosuch' is up"),
    (["exec", "h1", "--", "true"], 1, "no lab is up: start one with"),
    (["logs", "--name", "nosuch", "h1"], 2, "no lab named 'nosuch' is up"),
    (["console", "--name", "nosuch", "h1"], 2, "no lab named 'nosuch'"),
    (["capture", "--name", "x", "l1", "-w", "/dev/null"], 2,
     "no lab named 'x' is up"),
    (["pcp", "--name", "x", "h1"], 2, "no lab named 'x' is up"),
    (["restart", "--name", "x", "h1"], 2, "no lab named 'x' is up"),
    (["up", "--name", "Bad_Name"], 2, "lab name 'Bad_Name' must match"),
    (["exec", "h1"], 2, "exec: nothing to run"),
    (["demo", "dcbx", "a.toml", "b.toml"], 2,
     "demo: one topology at most, got a.toml b.toml"),
], ids=["status", "down", "exec-no-lab", "logs", "console", "capture",
        "pcp", "restart", "bad-lab-name", "exec-no-argv",
        "demo-two-topologies"])
def test_mistake_without_a_lab_is_one_line(tmp_path, args, rc, text):
    r = _dcblab(args, {"DCBLAB_RUN": str(tmp_path)})
    assert r.returncode == rc
    assert text in _one_line(r)
    assert list(tmp_path.iterdir()) == []   # nothing was started


def test_demo_dcbx_on_a_topology_without_dcbx_is_one_line(tmp_path):
    text = (ROOT / "topology" / "two-hosts.toml").read_text()
    assert "\ndcbx = true\n" in text
    topo = tmp_path / "no-dcbx.toml"
    topo.write_text(text.replace("\ndcbx = true\n", "\n"))
    run = tmp_path / "run"
    run.mkdir()
    r = _dcblab(["demo", "dcbx", str(topo)], {"DCBLAB_RUN": str(run)})
    assert r.returncode == 2
    assert "has no `dcbx = true`: lldpad would not run" in _one_line(r)
    assert list(run.iterdir()) == []


@pytest.mark.parametrize("var, value, text", [
    ("DCBLAB_ACCEL", "fast", "DCBLAB_ACCEL='fast': use tcg, kvm or auto"),
    ("FLAVOUR", "fancy", "FLAVOUR='fancy': unknown kernel flavour (known: "
                         "lab, debug)"),
])
def test_bad_environment_is_one_line_exit_2_and_nothing_left(tmp_path, var,
                                                             value, text):
    r = _dcblab(["up", "--name", "envcheck"],
                {"DCBLAB_RUN": str(tmp_path), var: value})
    assert r.returncode == 2
    assert text in _one_line(r)
    assert list(tmp_path.iterdir()) == []


def test_missing_dcblab_kernel_is_one_line_exit_1_and_nothing_left(
        tmp_path):
    missing = tmp_path / "none" / "bzImage"
    r = _dcblab(["up", "--name", "kernelcheck"],
                {"DCBLAB_RUN": str(tmp_path / "run"),
                 "DCBLAB_KERNEL": str(missing)})
    assert r.returncode == 1
    assert _one_line(r) == \
        f"dcblab: missing {missing} (DCBLAB_KERNEL names the kernel)\n"
    assert not (tmp_path / "run").exists() or \
        list((tmp_path / "run").iterdir()) == []


@pytest.mark.parametrize("args, text", [
    (["exec", "h3", "--", "true"], 'unknown host "h3" (hosts: h1, h2)'),
    (["logs", "h3"], 'unknown host "h3" (hosts: h1, h2)'),
    (["capture", "l9", "-w", "/dev/null"], 'unknown link "l9" (links: l1)'),
], ids=["exec", "logs", "capture"])
def test_unknown_host_or_link_of_a_running_lab_is_one_line_exit_2(lab, args,
                                                                  text):
    r = _dcblab([args[0], "--name", lab.name, *args[1:]])
    assert r.returncode == 2
    assert text in _one_line(r)


def test_status_asks_the_guests_of_a_lab_another_process_owns(lab):
    """The session lab is owned by this pytest process; its keeper holds
    the guests' agent sockets and serves this pytest and the CLI at once,
    so status reports each guest's uptime and memory."""
    lab.h1.run(["true"])  # this process is a client of the keeper too
    r = _dcblab(["status", "--name", lab.name, "-j"])
    assert r.returncode == 0, r.stderr
    (st,) = json.loads(r.stdout)
    assert (st["name"], st["status"], st["owner_pid"], st["backend"]) == \
        (lab.name, "up", os.getpid(), lab.lab.backend.name)
    assert {h["host"]: h["state"] for h in st["hosts"]} == \
        {h.name: "running" for h in lab.topology.hosts}
    assert all(h["uptime_s"] > 0 and h["mem_used_kib"] > 0
               for h in st["hosts"]), st["hosts"]


def test_pytest_with_an_unknown_flavour_is_one_line_exit_2(pytester,
                                                          monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("FLAVOUR", "fancy")
    pytester.makepyfile(test_inner="def test_x():\n    pass\n")
    res = pytester.runpytest_subprocess("-p", "dcblab.testing.plugin")
    assert res.ret == 2
    out = res.stdout.str() + res.stderr.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out, out
    assert "dcblab: FLAVOUR='fancy': unknown kernel flavour (known: lab, " \
           "debug)" in out


@pytest.mark.parametrize("name", [
    "link-between-two-ports-of-one-switch", "port-rate-not-a-tc-rate",
    "ets-bandwidth-not-summing-to-100"])
def test_bad_fabric_file_is_one_line_exit_2_and_nothing_started(tmp_path,
                                                                 name):
    path = f"tests/topology/bad/{name}.toml"
    expect = (ROOT / path).read_text().split("\n", 1)[0][len("# expect: "):]
    r = subprocess.run(DCBLAB + ["up", path], capture_output=True, text=True,
                       timeout=60, cwd=ROOT,
                       env={**os.environ, "DCBLAB_RUN": str(tmp_path)})
    assert r.returncode == 2
    assert _one_line(r) == f"dcblab: {expect}\n"
    assert list(tmp_path.iterdir()) == []
    assert not any(ns.startswith("dcblab-lab") for ns in subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True).stdout.split())


@pytest.mark.parametrize("args, text", [
    (["demo", "two-hosts.toml"], "demo: unknown demo 'two-hosts.toml' "
     "(known: fabric, netprio, dcbx, roce); a topology goes after it"),
    (["demo", "fabric", str(ROOT / "topology" / "two-hosts.toml")],
     "has no switch port with a rate and a dcb table"),
    (["demo", "roce", str(ROOT / "topology" / "two-hosts.toml")],
     "two-hosts.toml: no switch port has a rate"),
], ids=["topology-without-demo", "fabric-without-switch",
        "roce-without-switch"])
def test_demo_mistakes_are_one_line_and_start_nothing(tmp_path, args, text):
    r = _dcblab(args, {"DCBLAB_RUN": str(tmp_path)})
    assert r.returncode == 2
    assert text in _one_line(r)
    assert list(tmp_path.iterdir()) == []


def test_a_reader_that_goes_is_no_traceback():
    # `dcblab ... | head -1`: the pipe closes before dcblab has written.
    p = subprocess.Popen(DCBLAB + ["lab", "--teacher",
                                   "docs/labs/01-identity.md"],
                         cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=60) == 141
    assert err == ""
