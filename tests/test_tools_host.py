"""priosend and priosink on the host, no VM: usage, the C unit tests, and
end to end over a veth pair between two network namespaces.

The tools are plain C, so all they do apart from what a guest kernel adds
(net_prio, net_cls) is checked here in seconds.  The namespaces are
``dcbtools-<pytest pid>-a`` and ``-b``, their ``lo`` carries the alias
``dcblab-run:tools<pid>``, and a finalizer deletes them on every path.
"""

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dcblab.cmd import CmdError, run

ROOT = Path(__file__).resolve().parent.parent
PID = os.getpid()
NS_A, NS_B = f"dcbtools-{PID}-a", f"dcbtools-{PID}-b"
RUN_ALIAS = f"dcblab-run:tools{PID}"
DEV = "v0"
ADDR4 = ("203.0.113.1", "203.0.113.2")          # on v0, a /25
VLAN_ADDR4 = ("203.0.113.129", "203.0.113.130")  # on v0.VID, the other /25
ADDR6 = ("2001:db8:ee::1", "2001:db8:ee::2")
VID = 100
SINK_TIMEOUT = 30.0   # a sink that misses frames stops after this
SINK_IDLE = 3.0       # ...or this long after the last frame it saw


# --- build -------------------------------------------------------------------

@pytest.fixture(scope="session")
def tools_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tools")
    try:
        run(["make", "-C", str(ROOT / "tools"), f"OUT={out}"], timeout=300)
    except CmdError as e:
        pytest.fail(f"building the tools failed:\n{e}", pytrace=False)
    return out


@pytest.fixture(scope="session")
def priosend(tools_dir):
    return str(tools_dir / "priosend")


@pytest.fixture(scope="session")
def priosink(tools_dir):
    return str(tools_dir / "priosink")


# --- the veth pair -------------------------------------------------------------

class Pair:
    """Namespaces a and b joined by veth v0; addresses and MACs by side."""

    def __init__(self):
        self.ns = {"a": NS_A, "b": NS_B}
        self.mac = {}

    def ip(self, side, *args):
        return run(["ip", "-n", self.ns[side], *args])

    def exec_argv(self, side, argv):
        return ["ip", "netns", "exec", self.ns[side], *argv]


def _delete_netns():
    listed = run(["ip", "netns", "list"]).stdout.split()
    for ns in (NS_A, NS_B):
        if ns in listed:
            run(["ip", "netns", "del", ns], check=False)


@pytest.fixture(scope="session")
def pair(request):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    p = Pair()
    request.addfinalizer(_delete_netns)
    for side in "ab":
        run(["ip", "netns", "add", p.ns[side]])
        p.ip(side, "link", "set", "lo", "alias", RUN_ALIAS)
        p.ip(side, "link", "set", "lo", "up")
    p.ip("a", "link", "add", DEV, "type", "veth", "peer", "name", DEV,
         "netns", NS_B)
    for i, side in enumerate("ab"):
        p.ip(side, "addr", "add", f"{ADDR4[i]}/25", "dev", DEV)
        p.ip(side, "addr", "add", f"{ADDR6[i]}/64", "dev", DEV, "nodad")
        p.ip(side, "link", "set", DEV, "up")
        p.mac[side] = json.loads(
            p.ip(side, "-j", "link", "show", DEV).stdout)[0]["address"]
    # Static neighbours: a flood sent before ARP/ND resolved would be cut
    # to the kernel's small unresolved queue, and that is not the tools'.
    for i, side in enumerate("ab"):
        peer = "ba"[i]
        for addr in (ADDR4[1 - i], ADDR6[1 - i]):
            p.ip(side, "neigh", "replace", addr, "lladdr", p.mac[peer],
                 "dev", DEV, "nud", "permanent")
    return p


# --- running the tools ---------------------------------------------------------

class Sink:
    """priosink -j in namespace b, in its own process group, until ready."""

    def __init__(self, pair, priosink, tmp_path, *args, dev=DEV,
                 timeout=SINK_TIMEOUT):
        self.ready = tmp_path / f"sink-ready-{time.monotonic_ns()}"
        self.argv = pair.exec_argv("b", [priosink, "-j", "-i", dev,
                                         "-t", str(timeout),
                                         "-R", str(self.ready), *args])
        self.timeout = timeout
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        deadline = time.monotonic() + 10
        while not self.ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                out, err = self.proc.communicate()
                raise AssertionError(
                    f"{self.argv} did not create its ready file within 10 s: "
                    f"rc {self.proc.returncode}, stderr {err!r}")
            time.sleep(0.01)

    def result(self):
        try:
            out, err = self.proc.communicate(timeout=self.timeout + 15)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"{self.argv} outlived its --timeout")
        if self.proc.returncode != 0:
            raise CmdError(self.argv, self.proc.returncode, out, err)
        return json.loads(out)

    def stop(self):
        """SIGTERM to the group, SIGKILL after a grace period; reaped."""
        if self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def sink(pair, priosink, tmp_path):
    """sink(*priosink_args) starts one; all are stopped after the test."""
    started = []

    def start(*args, **kw):
        s = Sink(pair, priosink, tmp_path, *args, **kw)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


def _send(pair, priosend, *args):
    """priosend -j in namespace a; its JSON."""
    return json.loads(run(pair.exec_argv("a", [priosend, "-j", *args]),
                          timeout=120).stdout)


def _flow(result, flow):
    flows = {f["flow"]: f for f in result["flows"]}
    assert flow in flows, f"flow {flow} not seen: {result}"
    return flows[flow]


def _all_in_order(f, count):
    return (f["received"], f["lost"], f["duplicates"], f["reordered"],
            f["max_seq"]) == (count, 0, 0, 0, count - 1)


# --- usage -------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--count", "0", ADDR4[1]], "--count: '0'"),
    (["--size", "23", ADDR4[1]], "--size: '23'"),
    (["--bogus", ADDR4[1]], "unrecognized option '--bogus'"),
    ([], "need exactly one DEST"),
    (["-m", "raw", "-I", "lo", "02:00:00:00:00"], "'02:00:00:00:00' is not "
     "a MAC address"),
    (["--rate", "-1", ADDR4[1]], "--rate: '-1'"),
    (["not-an-address"], "'not-an-address' is not an IPv4 or IPv6"),
    (["-m", "raw", "02:00:00:00:00:01"], "raw mode needs --interface"),
], ids=["count-0", "size-23", "unknown-option", "missing-dest", "bad-mac",
        "rate-negative", "bad-address", "raw-without-interface"])
def test_priosend_usage_error_exits_2_with_message(priosend, args, message):
    res = run([priosend, *args], check=False)
    assert res.returncode == 2, res
    assert message in res.stderr
    assert "try priosend -h" in res.stderr


def test_priosink_without_interface_exits_2_with_message(priosink):
    res = run([priosink, "-j"], check=False)
    assert res.returncode == 2, res
    assert "need -i IFACE" in res.stderr
    assert "try priosink -h" in res.stderr


@pytest.mark.parametrize("tool", ["priosend", "priosink"])
def test_help_exits_0_and_prints_usage(tools_dir, tool):
    res = run([str(tools_dir / tool), "-h"])
    assert res.stdout.startswith(f"usage: {tool} ")
    assert "--json" in res.stdout and "--help" in res.stdout


def test_make_check_runs_the_c_unit_tests_green(tools_dir):
    res = run(["make", "-C", str(ROOT / "tools"), f"OUT={tools_dir}",
               "check"], timeout=300)
    last = res.stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"(\d+) passed, 0 failed", last)
    assert m and int(m[1]) > 0, res.stdout


def test_priosink_on_missing_interface_exits_1_naming_it(priosink):
    res = run([priosink, "-i", "nosuch-dcb0"], check=False)
    assert res.returncode == 1, res
    assert "interface nosuch-dcb0" in res.stderr


def test_cgroup_that_does_not_exist_exits_1_naming_it(priosend, tmp_path):
    missing = tmp_path / "no-such-cgroup"
    res = run([priosend, "--cgroup", str(missing), ADDR4[1]], check=False)
    assert res.returncode == 1, res
    assert f"cannot join cgroup {missing}: No such file or directory" \
        in res.stderr


# --- end to end over the veth pair -------------------------------------------

def test_udp_ipv4_frames_all_arrive_in_order(pair, priosend, sink):
    count, flow = 5000, 1
    s = sink("-c", str(count), "--idle", str(SINK_IDLE))
    sent = _send(pair, priosend, "-c", str(count), "-f", str(flow), ADDR4[1])
    got = s.result()
    assert sent["sent"] == count
    f = _flow(got, flow)
    assert _all_in_order(f, count), f
    assert f["pcp"] == {"untagged": count} and f["vid"] == {}


def test_udp_ipv6_frames_all_arrive_in_order(pair, priosend, sink):
    count, flow, size = 5000, 6, 1452   # 1452: the most IPv6 fits in 1500
    s = sink("-c", str(count), "--idle", str(SINK_IDLE))
    sent = _send(pair, priosend, "-c", str(count), "-f", str(flow),
                 "-s", str(size), ADDR6[1])
    got = s.result()
    assert sent["sent"] == count
    assert _all_in_order(_flow(got, flow), count), got


def test_udp_size_over_path_mtu_fails_instead_of_fragmenting(pair, priosend):
    res = run(pair.exec_argv("a", [priosend, "-s", "1453", ADDR6[1]]),
              check=False)
    assert res.returncode == 1, res
    assert "--size 1453 does not fit the path MTU" in res.stderr


def test_raw_frames_to_peer_mac_all_arrive_in_order(pair, priosend, sink):
    count, flow = 5000, 2
    s = sink("-c", str(count), "--idle", str(SINK_IDLE))
    sent = _send(pair, priosend, "-m", "raw", "-I", DEV, "-c", str(count),
                 "-f", str(flow), pair.mac["b"])
    got = s.result()
    assert (sent["sent"], sent["mode"]) == (count, "raw")
    assert _all_in_order(_flow(got, flow), count), got


def test_raw_ethertype_is_matched_only_as_asked(pair, priosend, sink):
    count, ethertype = 100, "0x88b6"
    s = sink("-E", ethertype, "-c", str(count), "--idle", str(SINK_IDLE))
    _send(pair, priosend, "-m", "raw", "-I", DEV, "-E", ethertype,
          "-c", str(count), pair.mac["b"])
    got = s.result()
    assert _all_in_order(_flow(got, 1), count), got

    s = sink(timeout=2)     # the default ethertype: no frame matches
    _send(pair, priosend, "-m", "raw", "-I", DEV, "-E", ethertype,
          "-c", str(count), pair.mac["b"])
    got = s.result()
    assert got["frames"] == 0 and got["other"] >= count, got


def test_two_flows_at_once_are_counted_separately(pair, priosend, sink):
    count, flows = 3000, (11, 12)
    s = sink("-c", str(count * len(flows)), "--idle", str(SINK_IDLE))
    procs = [subprocess.Popen(pair.exec_argv("a", [priosend, "-j", "-c",
                                                   str(count), "-f", str(f),
                                                   ADDR4[1]]),
                              stdout=subprocess.PIPE, text=True,
                              start_new_session=True) for f in flows]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0 and json.loads(out)["sent"] == count
    got = s.result()
    assert sorted(f["flow"] for f in got["flows"]) == sorted(flows)
    for flow in flows:
        assert _all_in_order(_flow(got, flow), count), got
    assert got["frames"] == count * len(flows)


def test_so_priority_is_recorded_in_the_so_priority_table(pair, priosend,
                                                          sink):
    count, prio = 500, 5
    s = sink("-c", str(count), "--idle", str(SINK_IDLE))
    sent = _send(pair, priosend, "-c", str(count), "-P", str(prio), ADDR4[1])
    got = s.result()
    assert sent["so_priority"] == prio
    assert _flow(got, 1)["so_priority"] == {str(prio): count}


def test_priosend_json_has_the_documented_fields(pair, priosend, sink):
    count, flow = 10, 42
    s = sink("-c", str(count), "--idle", str(SINK_IDLE))
    sent = _send(pair, priosend, "-c", str(count), "-f", str(flow), ADDR4[1])
    s.result()
    assert set(sent) == {"sent", "errors", "retries", "elapsed_s", "pps",
                         "flow", "mode", "so_priority", "moved_at"}
    assert (sent["sent"], sent["flow"], sent["mode"], sent["so_priority"],
            sent["moved_at"]) == (count, flow, "udp", 0, None)


def test_priosend_without_json_prints_a_one_line_summary(pair, priosend,
                                                         sink):
    count = 10
    s = sink("-c", str(count), "--idle", str(SINK_IDLE))
    res = run(pair.exec_argv("a", [priosend, "-c", str(count), ADDR4[1]]))
    s.result()
    lines = res.stdout.splitlines()
    assert len(lines) == 1 and f"{count} frames of flow 1" in lines[0], lines


def test_cgroup_and_move_to_write_own_pid_to_cgroup_procs(pair, priosend,
                                                          sink, tmp_path):
    # Plain directories stand in for cgroups: what priosend does is write
    # its pid to PATH/cgroup.procs, and the host's cgroups are not ours.
    count, after = 100, 30
    first, second = tmp_path / "first", tmp_path / "second"
    for d in (first, second):
        d.mkdir()
        (d / "cgroup.procs").write_text("")
    s = sink("-c", str(count), "--idle", str(SINK_IDLE))
    proc = subprocess.Popen(
        pair.exec_argv("a", [priosend, "-j", "-c", str(count),
                             "-g", str(first), "-M", str(second),
                             "--move-after", str(after), ADDR4[1]]),
        stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    sent = json.loads(out)
    got = s.result()
    assert sent["moved_at"] == after
    for d in (first, second):
        assert (d / "cgroup.procs").read_text() == f"{proc.pid}\n"
    assert _all_in_order(_flow(got, 1), count), got


def _inject_tagged(pair, tci, count, flow):
    """count raw frames with an in-band 802.1Q tag, sent from a by Python:
    the receiving veth's stack moves the tag to the skb (skb_vlan_untag),
    so priosink must read it from PACKET_AUXDATA."""
    script = (
        "import socket, struct, sys\n"
        "dev, dst, tci, count, flow = sys.argv[1:]\n"
        "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"
        "s.bind((dev, 0))\n"
        "hdr = bytes.fromhex(dst.replace(':', '')) + s.getsockname()[4]\n"
        "hdr += struct.pack('!HHH', 0x8100, int(tci), 0x88b5)\n"
        "for seq in range(int(count)):\n"
        "    s.send(hdr + struct.pack('!IIQII', 0x44434231, int(flow), seq,"
        " 0, 0) + bytes(40))\n")
    run(pair.exec_argv("a", [sys.executable, "-c", script, DEV,
                             pair.mac["b"], str(tci), str(count),
                             str(flow)]))


def test_tag_stripped_on_receive_is_read_from_auxdata(pair, sink):
    count, flow, pcp = 200, 7, 5
    s = sink("-c", str(count), "--idle", str(SINK_IDLE))
    _inject_tagged(pair, pcp << 13 | VID, count, flow)
    f = _flow(s.result(), flow)
    assert (f["pcp"], f["vid"]) == ({str(pcp): count}, {str(VID): count}), f
    assert _all_in_order(f, count), f


def test_tag_with_tci_0_counts_as_pcp_0_not_untagged(pair, sink):
    count, flow = 200, 8
    s = sink("-c", str(count), "--idle", str(SINK_IDLE))
    _inject_tagged(pair, 0, count, flow)
    f = _flow(s.result(), flow)
    assert (f["pcp"], f["vid"]) == ({"0": count}, {"0": count}), f


def _vlan_8021q_built_in():
    """True/False from the running kernel's config; None if unreadable."""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            return "CONFIG_VLAN_8021Q=y\n" in f.read()
    except OSError:
        return None


@pytest.fixture
def vlan(pair):
    """VLAN VID on v0 of both sides, a's mapping priority p to PCP p."""
    if _vlan_8021q_built_in() is False:
        pytest.skip("host kernel has no CONFIG_VLAN_8021Q=y (and cannot "
                    "load modules): VLAN devices are tested in the guests")
    dev = f"{DEV}.{VID}"
    qos = [f"{p}:{p}" for p in range(8)]
    try:
        for i, side in enumerate("ab"):
            pair.ip(side, "link", "add", "link", DEV, "name", dev, "type",
                    "vlan", "id", str(VID), "egress-qos-map", *qos)
            pair.ip(side, "addr", "add", f"{VLAN_ADDR4[i]}/25", "dev", dev)
            pair.ip(side, "link", "set", dev, "up")
        pair.ip("a", "neigh", "replace", VLAN_ADDR4[1], "lladdr",
                pair.mac["b"], "dev", dev, "nud", "permanent")
        yield dev
    finally:
        for side in "ab":
            run(["ip", "-n", pair.ns[side], "link", "del", dev], check=False)


def test_vlan_priority_arrives_as_pcp_and_vid_on_lower_device(pair, priosend,
                                                              sink, vlan):
    count, prio = 1000, 5
    s = sink("-c", str(count), "--idle", str(SINK_IDLE))   # on lower v0
    _send(pair, priosend, "-c", str(count), "-P", str(prio), VLAN_ADDR4[1])
    f = _flow(s.result(), 1)
    assert f["pcp"] == {str(prio): count}, f
    assert f["vid"] == {str(VID): count}, f


def test_rate_paces_frames_no_faster_than_asked(pair, priosend, sink):
    count, rate = 50, 200
    least = (count - 1) / rate
    s = sink("-c", str(count), "--idle", str(SINK_IDLE))
    t0 = time.monotonic()
    sent = _send(pair, priosend, "-c", str(count), "-r", str(rate), ADDR4[1])
    wall = time.monotonic() - t0
    got = s.result()
    assert sent["elapsed_s"] >= least and wall >= least, (sent, wall)
    assert _all_in_order(_flow(got, 1), count), got


def test_priosink_stops_at_timeout_when_nothing_arrives(sink):
    timeout = 0.5
    s = sink(timeout=timeout)
    got = s.result()
    assert (got["frames"], got["flows"]) == (0, [])
    assert got["elapsed_s"] >= timeout
    assert got["interface"] == DEV


def test_priosink_stops_when_idle_after_frames(pair, priosend, sink):
    count, idle = 20, 0.5
    s = sink("--idle", str(idle))
    _send(pair, priosend, "-c", str(count), ADDR4[1])
    got = s.result()
    assert _all_in_order(_flow(got, 1), count), got
    assert got["elapsed_s"] < SINK_TIMEOUT   # idle, not the timeout, ended it


def test_priosink_prints_its_result_on_sigterm(sink):
    s = sink()
    s.proc.send_signal(signal.SIGTERM)
    got = s.result()
    assert got["frames"] == 0
    assert got["elapsed_s"] < SINK_TIMEOUT


def test_priosink_json_has_the_documented_fields(pair, priosend, sink):
    count = 10
    s = sink("-c", str(count), "--idle", str(SINK_IDLE))
    _send(pair, priosend, "-c", str(count), ADDR4[1])
    got = s.result()
    assert set(got) == {"interface", "frames", "other", "socket_drops",
                        "elapsed_s", "flows"}
    assert set(_flow(got, 1)) == {"flow", "received", "lost", "duplicates",
                                  "reordered", "max_seq", "pcp", "vid",
                                  "so_priority"}
