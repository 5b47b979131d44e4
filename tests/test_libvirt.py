"""The libvirt backend: a lab's guests as domains of a private libvirtd
started in the lab's netns and a private mount namespace.

These tests start their own libvirt labs whatever the session's backend
is (the rest of the suite runs on libvirt with `--backend libvirt` or
DCBLAB_BACKEND=libvirt): `virsh` sees exactly the lab's hosts, the XML
has the lab's taps unmanaged with their queue count, the daemon and its
QEMUs live in the lab's netns, guest commands behave as on the qemu
backend, and neither `down` nor a killed keeper plus `dcblab reap` leaves
a process, netns or run directory behind. That nothing at all is left on
the host (files, mounts, links...) is tests/test_host_untouched.py's, on
both backends.
"""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dcblab.backends import (LibvirtBackend, QemuVm, TapNic, VmSpec,
                             domain_xml)
from dcblab.backends.libvirt import LibvirtVm
from dcblab.core import proc
from dcblab.core.paths import ROOT, default_topology
from dcblab.lab import Wire, leftovers, run_pids, run_root
from dcblab.topology import load

DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]
def _dcblab(args, timeout=180, **kw):
    return subprocess.run(DCBLAB + args, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, **kw)


def _virsh(uri, *args):
    r = subprocess.run(["virsh", "-c", uri, *args], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _netns_inode(pid):
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def _state(name):
    return json.loads((run_root() / name / "state.json").read_text())


@pytest.fixture
def name(request):
    n = f"lv{os.getpid() % 100000}-{request.node.name[5:10]}".lower()
    n = "".join(c if c.isalnum() or c == "-" else "-" for c in n)[:16]
    yield n
    if (run_root() / n / "state.json").exists():
        _dcblab(["down", "--name", n])
        _dcblab(["reap"])


# --- the domain XML (no guest) ------------------------------------------------

def _spec(queues=8, cpus=2, accel="tcg"):
    return VmSpec("h1", Path("/k/bzImage"), Path("/k/initramfs.cpio"),
                  memory_mib=160, cpus=cpus, accel=accel,
                  nics=(TapNic("eth0", "h1-eth0", "02:dc:00:00:00:00",
                               queues),),
                  cmdline=("dcblab.run=0123456789ab",))


@pytest.mark.parametrize("accel,dtype", [("tcg", "qemu"), ("kvm", "kvm")])
def test_domain_xml_is_the_qemu_backends_guest(tmp_path, accel, dtype):
    """Same kernel, initrd and command line words as the qemu backend's
    argv; the tap unmanaged with its queues, no ROM; one socket per vCPU;
    the agent channel; no USB, no balloon; valid by libvirt's schema."""
    spec = _spec(accel=accel)
    xml = domain_xml(spec, tmp_path)
    (tmp_path / "h1.xml").write_text(xml)
    r = subprocess.run(["virt-xml-validate", str(tmp_path / "h1.xml"),
                        "domain"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    dom = ET.fromstring(xml)
    assert dom.get("type") == dtype
    argv = QemuVm(spec, tmp_path / "q").argv()
    assert dom.findtext("os/kernel") == argv[argv.index("-kernel") + 1]
    assert dom.findtext("os/initrd") == argv[argv.index("-initrd") + 1]
    assert dom.findtext("os/cmdline") == argv[argv.index("-append") + 1]
    (nic,) = dom.findall("devices/interface")
    assert nic.get("type") == "ethernet"
    assert nic.find("target").attrib == {"dev": "h1-eth0", "managed": "no"}
    assert nic.find("driver").get("queues") == "8"
    assert nic.find("model").get("type") == "virtio"
    assert nic.find("rom").get("enabled") == "no"
    assert nic.find("mac").get("address") == "02:dc:00:00:00:00"
    assert dom.find("cpu/topology").get("sockets") == "2"
    assert dom.find("devices/serial").get("type") == "pty"
    assert dom.find("devices/serial/log").attrib == {
        "file": str(tmp_path / "console.log"), "append": "off"}
    (chan,) = dom.findall("devices/channel")
    assert chan.find("target").get("name") == "org.qemu.guest_agent.0"
    assert dom.find("devices/controller[@type='usb']").get("model") == "none"
    assert dom.find("devices/memballoon").get("model") == "none"
    assert dom.find("devices/rng/backend").text == "/dev/urandom"


def test_every_nic_has_ctrl_vlan_off(tmp_path):
    """As on the qemu backend (qemu.py: QEMU 7.2 clears a restored NIC's
    VLAN table): a <qemu:override> per NIC, by libvirt's alias."""
    spec = _spec()
    spec = dataclasses.replace(spec, nics=spec.nics + (
        TapNic("eth1", "h1-eth1", "02:dc:00:00:00:01", 1),))
    dom = ET.fromstring(domain_xml(spec, tmp_path))
    q = "{http://libvirt.org/schemas/domain/qemu/1.0}"
    devs = dom.findall(f"{q}override/{q}device")
    assert [d.get("alias") for d in devs] == ["net0", "net1"]
    for d in devs:
        (prop,) = d.findall(f"{q}frontend/{q}property")
        assert prop.attrib == {"name": "ctrl_vlan", "type": "bool",
                               "value": "false"}


def test_restore_xml_keeps_the_saved_guest_and_takes_this_runs_parts(
        tmp_path):
    """What a libvirt lab restores a saved guest with: the saved XML (its
    UUID, addresses and MACs: libvirt's ABI check) with this lab's kernel
    command line (run id), taps and run directory everywhere the saving
    lab's was; the console log appended to only for the saving lab."""
    saved = domain_xml(_spec(), tmp_path / "old" / "h1").replace(
        "<name>h1</name>", "<name>h1</name><uuid>4ae6dd4a-abd4-4a8d-be35-"
        "01d2cf525439</uuid>").replace(
        "</devices>", "<console type='pty'><log file="
        f"'{tmp_path}/old/h1/console.log' append='off'/><target "
        "type='serial' port='0'/></console></devices>")
    new = TapNic("eth0", "h1-eth0", "02:dc:00:00:00:00", 8)
    spec = VmSpec("h1", Path("/k/bzImage"), Path("/k/initramfs.cpio"),
                  memory_mib=160, cpus=2, nics=(new,),
                  cmdline=("dcblab.run=ba9876543210",))
    vm = LibvirtVm(None, spec, tmp_path / "new" / "h1")
    for append in (False, True):
        dom = ET.fromstring(vm.restore_xml(saved, append=append))
        assert dom.findtext("uuid") == "4ae6dd4a-abd4-4a8d-be35-01d2cf525439"
        assert "dcblab.run=ba9876543210" in dom.findtext("os/cmdline")
        logs = [x.attrib for x in dom.iter("log")]
        assert logs == 2 * [{"file": f"{tmp_path}/new/h1/console.log",
                             "append": "on" if append else "off"}]
        assert dom.find("devices/console[@type='unix']/source").get(
            "path") == f"{tmp_path}/new/h1/shell.sock"
        assert str(tmp_path / "old") not in ET.tostring(dom).decode()
        q = "{http://libvirt.org/schemas/domain/qemu/1.0}"
        assert dom.find(f"{q}override/{q}device").get("alias") == "net0"


def test_identity_is_the_domain_xml_without_the_runs_parts(tmp_path):
    """The snapshot key's part of a libvirt guest: libvirt's version and
    the domain XML, the run directory a placeholder, no TSC frequency
    (compared within a tolerance instead: lab/snapshots.py)."""
    ident = LibvirtBackend().identity(_spec())
    assert ident[0].startswith("libvirt ")
    assert "@RUNDIR@/console.log" in ident[1]
    assert "tsc_early_khz" not in ident[1]
    assert "ctrl_vlan" in ident[1]
    assert LibvirtBackend().snapshots


def test_single_queue_nic_has_no_queues_attribute(tmp_path):
    nic = ET.fromstring(domain_xml(_spec(queues=1), tmp_path)).find(
        "devices/interface")
    assert "queues" not in nic.find("driver").attrib


def test_export_writes_valid_domains_and_the_wire(tmp_path):
    out = tmp_path / "out"
    r = _dcblab(["export", "--libvirt", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    topo = load(default_topology())
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["README", "wire.sh"] + [f"{h.name}.xml" for h in topo.hosts] +
        [h.name for h in topo.hosts])
    for h in topo.hosts:
        v = subprocess.run(["virt-xml-validate", str(out / f"{h.name}.xml"),
                            "domain"], capture_output=True, text=True)
        assert v.returncode == 0, v.stdout + v.stderr
        dom = ET.fromstring((out / f"{h.name}.xml").read_text())
        assert [i.find("target").get("dev")
                for i in dom.findall("devices/interface")] == \
            [Wire.tap(n) for n in h.nics]
        assert "dcblab.run=" not in dom.findtext("os/cmdline")
    wire = Wire(topo, topo.name, "x")
    lines = [x for x in (out / "wire.sh").read_text().splitlines()
             if x and not x.startswith("#") and x != "set -e"]
    assert lines == [" ".join(c) for c in wire.link_commands()]
    # A second export into the same folder: refused, one line, exit 2.
    r = _dcblab(["export", "--libvirt", "-o", str(out)])
    assert r.returncode == 2
    assert r.stderr == f"dcblab: {out}: not empty (export writes a fresh " \
                       "folder)\n"


def test_export_refuses_a_split_topology_in_one_line(tmp_path):
    """A topology whose guests run on other machines (docs/scale.md) has
    no single set of domains and wire: refused before anything is
    written."""
    out = tmp_path / "out"
    split = ROOT / "topology" / "dcb-fabric-split.toml"
    r = _dcblab(["export", "--libvirt", str(split), "-o", str(out)])
    assert r.returncode == 2
    assert r.stderr == (
        f"dcblab: dcblab export --libvirt: {split} runs guests on other "
        "machines (h1, h2 on a; h3, sw on b): export writes one machine's "
        "domains and wire; `dcblab up` runs a split lab (docs/scale.md)\n")
    assert not out.exists()


# --- a libvirt lab ----------------------------------------------------------------

def test_libvirt_lab_seen_by_virsh_and_gone_after_down(name):
    """up: virsh on the printed URI lists exactly the hosts, running; the
    XML has the taps unmanaged with the link's queues; the daemon and the
    QEMUs run in the lab's netns, in a mount namespace of their own;
    commands behave as on the qemu backend. down: nothing left."""
    r = _dcblab(["up", "--backend", "libvirt", "--name", name])
    assert r.returncode == 0, r.stderr
    st = _state(name)
    assert st["backend"] == "libvirt"
    uri = st["backend_info"]["uri"]
    assert f"export LIBVIRT_DEFAULT_URI='{uri}'" in r.stdout.splitlines()
    assert uri == f"qemu:///system?socket={run_root() / name}" \
                  "/libvirt/run/libvirt-sock"
    topo = load(default_topology())
    hosts = sorted(h.name for h in topo.hosts)
    assert sorted(_virsh(uri, "list", "--all", "--name").split()) == hosts
    assert sorted(_virsh(uri, "list", "--state-running",
                         "--name").split()) == hosts
    for h in topo.hosts:
        dom = ET.fromstring(_virsh(uri, "dumpxml", h.name))
        nics = {i.find("target").get("dev"): i for i in
                dom.findall("devices/interface")}
        for n in h.nics:
            i = nics[Wire.tap(n)]
            assert i.find("target").get("managed") == "no"
            assert int(i.find("driver").get("queues", 1)) == n.queues
    # Where the daemon and its QEMUs run.
    ns = os.stat(st["netns"]).st_ino
    daemon = st["backend_info"]["daemon_pid"]
    qemus = [e["pid"] for e in st["hosts"].values()]
    tagged = set(run_pids(st["run_id"]))
    for pid in [daemon] + qemus:
        assert _netns_inode(pid) == ns
        assert os.stat(f"/proc/{pid}/ns/mnt").st_ino != \
            os.stat("/proc/self/ns/mnt").st_ino
        assert pid in tagged  # the reaper finds it by run id
    assert subprocess.run(["ip", "link", "show", "h1-eth0"],
                          capture_output=True).returncode != 0
    # Guest commands: output, exit code and timeout as on the qemu backend.
    r = _dcblab(["exec", "--name", name, "h1", "--", "sh", "-c",
                 "echo out; echo err >&2; exit 3"])
    assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")
    t0 = time.monotonic()
    r = _dcblab(["exec", "--name", name, "--timeout", "2", "h1", "--",
                 "sleep", "30"])
    # As `timeout(1)`, and as on the qemu backend (test_guest_cli.py).
    assert (r.returncode, r.stdout) == (124, "") and \
        time.monotonic() - t0 < 20, (r.returncode, r.stderr)
    r = _dcblab(["exec", "--name", name, "h1", "--", "no-such-tool"])
    assert (r.returncode, r.stderr) == (
        127, "dcblab-run: no-such-tool: command not found\n")
    r = _dcblab(["exec", "--name", name, "h1", "--", "ping", "-c", "2",
                 "-W", "2", "198.51.100.2"])
    assert r.returncode == 0, r.stdout + r.stderr
    r = _dcblab(["status", "--name", name])
    assert "libvirt backend" in r.stdout and f"virsh -c '{uri}'" in r.stdout

    r = _dcblab(["down", "--name", name])
    assert r.returncode == 0, r.stderr
    assert leftovers(name, st["run_id"]) == []
    assert not any(proc.running(p) for p in [daemon] + qemus)


def test_killed_keeper_leaves_daemon_and_qemus_that_reap_removes(name):
    """The keeper and its guard killed outright (kill -9 of the process
    group): libvirtd and the QEMUs it daemonised run on, carrying the run
    id; `dcblab reap` removes them, the netns and the run dir."""
    r = _dcblab(["up", "--backend", "libvirt", "--name", name])
    assert r.returncode == 0, r.stderr
    st = _state(name)
    daemon = st["backend_info"]["daemon_pid"]
    qemus = [e["pid"] for e in st["hosts"].values()]
    os.killpg(st["guard_pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while proc.running(st["keeper_pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not proc.running(st["keeper_pid"])
    left = set(run_pids(st["run_id"]))
    assert {daemon, *qemus} <= left and all(proc.running(p) for p in left)
    r = _dcblab(["reap"])
    assert r.returncode == 0, r.stderr
    assert f"reaping run {st['run_id']}" in r.stdout
    assert leftovers(name, st["run_id"]) == []
    assert not any(proc.running(p) for p in left)


# --- choosing the backend ---------------------------------------------------------

def test_unknown_backend_in_the_environment_is_one_line_exit_2(name):
    r = _dcblab(["up", "--name", name], env=dict(os.environ,
                                                 DCBLAB_BACKEND="xen"))
    assert (r.returncode, r.stderr) == (
        2, "dcblab: DCBLAB_BACKEND='xen': unknown backend (known: libvirt, "
           "qemu)\n")
    assert not (run_root() / name).exists()


@pytest.mark.parametrize("how", ["option", "environment"])
def test_pytest_reports_the_backend_it_was_given(pytester, monkeypatch, how):
    """--dcblab-backend (or DCBLAB_BACKEND) names the backend in the session
    header and reaches the labs tests start themselves."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    args = ["-p", "dcblab.testing.plugin", "-s"]
    if how == "option":
        monkeypatch.delenv("DCBLAB_BACKEND", raising=False)
        args += ["--dcblab-backend", "libvirt"]
    else:
        monkeypatch.setenv("DCBLAB_BACKEND", "libvirt")
    pytester.makepyfile(test_inner="import os\n\ndef test_x():\n"
                        "    print('env', os.environ['DCBLAB_BACKEND'])\n")
    res = pytester.runpytest_subprocess(*args)
    assert res.ret == 0, res.stdout.str() + res.stderr.str()
    res.stdout.fnmatch_lines([
        "dcblab: kernel *, flavour *, libvirt backend, *", "*env libvirt*"])
