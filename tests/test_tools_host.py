"""priosend, priosink and cgwrite are plain C: tested on the host too.

Usage handling runs the binaries directly; traffic runs across a veth pair
between two network namespaces this module creates, bound on files in the
build directory (BUILD/tools-netns-<pid>/a and b, as a lab's is in its run
directory: nothing in /run/netns) and always removes.
"""

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from dcblab.core.ns import umount
from dcblab.core.paths import ROOT, build_dir

PID = os.getpid()
NS_DIR = build_dir() / f"tools-netns-{PID}"
NS_A, NS_B = str(NS_DIR / "a"), str(NS_DIR / "b")
V4_A, V4_B = "203.0.113.65", "203.0.113.66"
V6_A, V6_B = "2001:db8:ee::1", "2001:db8:ee::2"

# tools/payload.h: what priosend writes and priosink looks for in raw mode
PAYLOAD_MAGIC, RAW_ETHERTYPE = 0x44434231, 0x88B5
# ... and the least flow id priosend picks when not given --flow
FLOW_AUTO_MIN = int(re.search(r"#define FLOW_AUTO_MIN (\d+)u", (
    ROOT / "tools" / "payload.h").read_text()).group(1))
ETH_P_8021Q = 0x8100

# Frames priosend cannot make: 802.1Q-tagged ones, built by hand.  The
# kernel moves the tag of a received frame into PACKET_AUXDATA, which is
# what priosink reads, so no VLAN device (nor 8021q) is needed.
_INJECT = """
import socket, struct, sys
dev, dst, tci, flow, prio, count = sys.argv[1:]
dst = bytes.fromhex(dst.replace(":", ""))
src = bytes.fromhex("020000000001")
tag = struct.pack("!HHH", %d, int(tci), %d)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((dev, 0))
for seq in range(int(count)):
    s.send(dst + src + tag + struct.pack("!IIQI4x", %d, int(flow), seq,
                                         int(prio)))
""" % (ETH_P_8021Q, RAW_ETHERTYPE, PAYLOAD_MAGIC)


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    out = tmp_path_factory.mktemp("tools")
    r = subprocess.run(["make", "-s", "-C", str(ROOT / "tools"),
                        f"OUT={out}"], capture_output=True, text=True)
    assert r.returncode == 0, f"tools did not build:\n{r.stdout}{r.stderr}"
    return out


def _run(argv, **kw):
    return subprocess.run([str(a) for a in argv], capture_output=True,
                          text=True, timeout=60, **kw)


@pytest.fixture(scope="module")
def veth(tools):
    def ip(ns, *args):
        subprocess.run(["nsenter", f"--net={ns}", "ip", *args], check=True,
                       capture_output=True)

    NS_DIR.mkdir(parents=True, exist_ok=True)
    made = []
    try:
        for ns in (NS_A, NS_B):
            open(ns, "w").close()
            subprocess.run(["unshare", f"--net={ns}", "true"], check=True)
            made.append(ns)
            ip(ns, "link", "set", "lo", "up")
        # A path (it has a '/'): ip opens it instead of /run/netns/NAME.
        ip(NS_A, "link", "add", "va", "type", "veth", "peer", "name", "vb",
           "netns", NS_B)
        for ns, dev, v4, v6 in ((NS_A, "va", V4_A, V6_A),
                                (NS_B, "vb", V4_B, V6_B)):
            ip(ns, "addr", "add", f"{v4}/26", "dev", dev)
            ip(ns, "addr", "add", f"{v6}/64", "dev", dev, "nodad")
            ip(ns, "link", "set", dev, "up")
        mac_b = json.loads(subprocess.run(
            ["nsenter", f"--net={NS_B}", "ip", "-j", "link", "show", "vb"],
            check=True, capture_output=True, text=True).stdout)[0]["address"]
        yield {"tools": tools, "mac_b": mac_b}
    finally:
        for ns in made:
            umount(ns)
        shutil.rmtree(NS_DIR, ignore_errors=True)


def _sink(veth, *args, timeout=10, json_out=True):
    ready = veth["tools"] / f"ready-{time.monotonic_ns()}"
    proc = subprocess.Popen(
        ["nsenter", f"--net={NS_B}", str(veth["tools"] / "priosink"),
         *(["-j"] if json_out else []), "-i", "vb", "-t", str(timeout),
         "-R", str(ready), *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not ready.exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "priosink never became ready"
        time.sleep(0.01)
    return proc


def _send(veth, *args):
    r = _run(["nsenter", f"--net={NS_A}", veth["tools"] / "priosend", "-j",
              *args])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _inject_tagged(veth, *, pcp, vid, flow, prio, count):
    """count raw frames of flow from va to vb, tagged PCP pcp, VID vid."""
    r = _run(["nsenter", f"--net={NS_A}", sys.executable, "-c", _INJECT,
              "va", veth["mac_b"], pcp << 13 | vid, flow, prio, count])
    assert r.returncode == 0, r.stderr


def _collect(proc, json_out=True):
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return json.loads(out) if json_out else out


def _flow(result, flow):
    return next(f for f in result["flows"] if f["flow"] == flow)


def test_c_unit_tests_pass(tools):
    r = _run(["make", "-s", "--no-print-directory", "-C", ROOT / "tools",
              f"OUT={tools}", "check"])
    assert r.returncode == 0, r.stdout + r.stderr
    # One summary per test program: util/seqtrack, dcblab-run,
    # dcbapp-netprio's parser and engine, cgfuzz's model and generator,
    # dcbfuzz's model and requests, PFC frames and pfcd's decision, the
    # ets qdisc pfcd makes from a port's DCB, nldump's lines.
    summaries = re.findall(r"^(.*\d+ passed, (\d+) failed)$", r.stdout, re.M)
    assert len(summaries) == 8, r.stdout
    assert [failed for _, failed in summaries] == ["0"] * 8, r.stdout


@pytest.mark.parametrize("tool", ["priosend", "priosink", "cgwrite",
                                  "dcbnl-raw", "dcbapp-netprio", "prioping",
                                  "tsc-khz", "cgfuzz", "pfcsend", "pfcd",
                                  "nldump"])
def test_help_exits_0_with_usage(tools, tool):
    r = _run([tools / tool, "-h"])
    assert r.returncode == 0 and r.stdout.startswith("usage:")


USAGE_ERRORS = {
    "priosend": {
        "count-0": ["--count", "0", "192.0.2.1"],
        "size-23": ["--size", "23", "192.0.2.1"],
        "rate-negative": ["--rate", "-1", "192.0.2.1"],
        "unknown-option": ["--bogus", "192.0.2.1"],
        "no-dest": [],
        "bad-address": ["not-an-address"],
        "bad-mac": ["--mode", "raw", "-I", "lo", "02:00:00:00:00"],
        "raw-without-interface": ["--mode", "raw", "02:00:00:00:00:01"],
    },
    "priosink": {
        "no-interface": [],
        "timeout-not-a-number": ["-i", "lo", "-t", "x"],
        "interface-without-value": ["-i"],
        "interval-0": ["-i", "lo", "--interval", "0"],
        "interval-over-an-hour": ["-i", "lo", "--interval", "3600001"],
        "interval-too-many": ["-i", "lo", "--interval", "1", "-t", "2000"],
    },
    "cgwrite": {
        "no-operands": [],
        "one-operand": ["only-a-path"],
        "unknown-option": ["-x", "p", "v"],
    },
    # Refused before any netlink socket is opened.
    "dcbnl-raw": {
        "no-operands": [],
        "no-hex": ["eth0", "ets"],
        "unknown-kind": ["eth0", "bogus", "00"],
        "ets-short": ["eth0", "ets", "00" * 58],
        "reset-with-hex": ["eth0", "reset", "00"],
        "get-with-hex": ["eth0", "get", "00"],
    },
    "prioping": {
        "no-dest": [],
        "count-0": ["-c", "0", "192.0.2.1"],
        "size-over-1472": ["-s", "1473", "192.0.2.1"],
        "ipv6-dest": ["2001:db8::1"],
        "interval-not-a-number": ["-i", "x", "192.0.2.1"],
    },
    # Refused before any socket is opened.
    "pfcsend": {
        "no-interface": ["-p", "3"],
        "no-priority": ["-I", "lo"],
        "prio-and-vector": ["-I", "lo", "-p", "3", "--vector", "8"],
        "priority-8": ["-I", "lo", "-p", "8"],
        "quanta-over-65535": ["-I", "lo", "-p", "3", "-q", "65536"],
        "length-13": ["-I", "lo", "-p", "3", "--length", "13"],
    },
    "pfcd": {
        "no-port": [],
        "xon-above-xoff": ["swp1:100:200"],
        "not-port-xoff-xon": ["swp1:100"],
        "limit-below-xoff": ["swp1:100:50:99"],
        "quanta-0": ["--quanta", "0", "swp1:100:50"],
    },
    "dcbapp-netprio": {
        "dev-with-slash": ["--dev", "a/b"],
        "unknown-option": ["--bogus"],
        "empty-cgroup-root": ["--cgroup-root="],
        "empty-nft": ["--nft="],
        "operand": ["extra"],
    },
    "nldump": {
        "no-operand": [],
        "unknown-dump": ["links"],
        "two-operands": ["qdiscs", "nft-tables"],
    },
}


@pytest.mark.parametrize("tool, args", [
    (tool, args) for tool, cases in USAGE_ERRORS.items()
    for args in cases.values()],
    ids=[f"{tool}-{case}" for tool, cases in USAGE_ERRORS.items()
         for case in cases])
def test_usage_error_is_one_line_and_exits_2(tools, tool, args):
    r = _run([tools / tool, *args])
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith(f"{tool}: ")
    assert r.stderr.endswith(f"; try {tool} -h\n")
    assert r.stderr.count("\n") == 1, r.stderr


def test_priosend_into_missing_cgroup_fails_naming_it(tools):
    r = _run([tools / "priosend", "--cgroup", "/nonexistent/cg",
              "192.0.2.1"])
    assert r.returncode == 1
    assert "/nonexistent/cg" in r.stderr


def test_cgwrite_reports_errno_by_name(tools, tmp_path):
    r = _run([tools / "cgwrite", tmp_path / "no" / "file", "x"])
    assert r.returncode == 1 and "ENOENT" in r.stderr
    target = tmp_path / "f"
    target.touch()  # cgwrite opens without O_CREAT, like a cgroup file
    assert _run([tools / "cgwrite", target, "eth0 5"]).returncode == 0
    assert target.read_text() == "eth0 5"


def test_cgwrite_json_reports_errno_name_and_bytes_written(tools, tmp_path):
    target, value = tmp_path / "f", "eth0 5"
    target.touch()
    r = _run([tools / "cgwrite", "-j", target, value])
    assert json.loads(r.stdout) == {"errno": 0, "name": "",
                                    "written": len(value)}
    r = _run([tools / "cgwrite", "-j", tmp_path / "no" / "file", value])
    assert r.returncode == 1
    assert json.loads(r.stdout) == {"errno": errno.ENOENT, "name": "ENOENT",
                                    "written": -1}


@pytest.mark.parametrize("family, dst", [("ipv4", V4_B), ("ipv6", V6_B)])
def test_udp_frames_all_arrive_in_order(veth, family, dst):
    count = 2000
    sink = _sink(veth, "-c", count)
    sent = _send(veth, "--count", count, "--flow", 7, dst)
    got = _collect(sink)
    assert sent["sent"] == count
    f = _flow(got, 7)
    assert (f["received"], f["lost"], f["duplicates"], f["reordered"]) == \
        (count, 0, 0, 0)
    assert f["untagged"] == count and f["pcp"] == [0] * 8
    assert f["vid"] == []


def test_raw_frames_to_peer_mac_arrive(veth):
    count = 500
    sink = _sink(veth, "-c", count)
    sent = _send(veth, "--mode", "raw", "-I", "va", "--count", count,
                 veth["mac_b"])
    f = _flow(_collect(sink), sent["flow"])
    assert (f["received"], f["lost"]) == (count, 0)


def test_two_flows_at_once_are_counted_apart(veth):
    per_flow = 1000
    sink = _sink(veth, "-c", 2 * per_flow)
    procs = [subprocess.Popen(
        ["nsenter", f"--net={NS_A}", str(veth["tools"] / "priosend"), "-j",
         "--count", str(per_flow), "--flow", str(flow), V4_B],
        stdout=subprocess.PIPE, text=True) for flow in (1, 2)]
    for p in procs:
        assert p.wait(timeout=60) == 0
    got = _collect(sink)
    for flow in (1, 2):
        assert _flow(got, flow)["received"] == per_flow


def test_so_priority_is_recorded_in_the_payload(veth):
    count, prio = 300, 6
    sink = _sink(veth, "-c", count)
    sent = _send(veth, "--count", count, "--so-priority", prio, V4_B)
    assert sent["so_priority"] == prio
    assert _flow(_collect(sink), sent["flow"])["so_priority"] == \
        [{"priority": prio, "frames": count}]


def test_two_senders_without_flow_get_flow_ids_of_their_own(veth):
    """The default flow id is drawn per run, above the ids given by hand:
    two priosends started alike are two flows at the sink, not one flow
    with every frame a duplicate."""
    per_flow = 500
    sink = _sink(veth, "-c", 2 * per_flow)
    procs = [subprocess.Popen(
        ["nsenter", f"--net={NS_A}", str(veth["tools"] / "priosend"), "-j",
         "--count", str(per_flow), V4_B], stdout=subprocess.PIPE, text=True)
        for _ in range(2)]
    flows = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        flows.append(json.loads(out)["flow"])
    got = _collect(sink)
    assert flows[0] != flows[1]
    assert min(flows) >= FLOW_AUTO_MIN
    for flow in flows:
        f = _flow(got, flow)
        assert (f["received"], f["duplicates"]) == (per_flow, 0)


def test_priosend_help_explains_refused_and_the_default_flow(tools):
    out = _run([tools / "priosend", "-h"]).stdout
    refused = out[out.index("N refused"):out.index("N retries")]
    assert "ECONNREFUSED" in refused and "ICMP port unreachable" in refused
    assert "sent again" in refused and '-j: "errors"' in refused
    assert f"a random id\n{' ' * 26}from {FLOW_AUTO_MIN} up" in out


def test_tagged_frames_land_in_their_pcp_slot(veth):
    count, pcp, vid, flow, prio = 300, 5, 100, 3, 4
    sink = _sink(veth, "-c", count)
    _inject_tagged(veth, pcp=pcp, vid=vid, flow=flow, prio=prio,
                   count=count)
    f = _flow(_collect(sink), flow)
    assert f["received"] == count
    assert f["pcp"] == [count if p == pcp else 0 for p in range(8)]
    assert f["untagged"] == 0
    assert f["vid"] == [{"vid": vid, "frames": count}]
    assert f["so_priority"] == [{"priority": prio, "frames": count}]


def test_priosink_json_has_exactly_the_pinned_keys_and_types(veth):
    count = 10
    sink = _sink(veth, "-c", count)
    _inject_tagged(veth, pcp=1, vid=2, flow=1, prio=3, count=count)
    got = _collect(sink)
    assert {k: type(v) for k, v in got.items()} == {
        "interface": str, "frames": int, "other": int, "socket_drops": int,
        "elapsed_s": float, "flows": list}
    (f,) = got["flows"]
    assert {k: type(v) for k, v in f.items()} == {
        "flow": int, "received": int, "lost": int, "duplicates": int,
        "reordered": int, "max_seq": int, "pcp": list, "untagged": int,
        "vid": list, "so_priority": list}
    assert len(f["pcp"]) == 8 and all(type(n) is int for n in f["pcp"])
    for key, entries in (("vid", f["vid"]), ("priority", f["so_priority"])):
        assert entries and all(
            {k: type(v) for k, v in e.items()} == {key: int, "frames": int}
            for e in entries)


def test_priosink_text_names_pcp_with_its_count(veth):
    count, pcp = 20, 6
    sink = _sink(veth, "-c", count, json_out=False)
    _inject_tagged(veth, pcp=pcp, vid=7, flow=1, prio=0, count=count)
    out = _collect(sink, json_out=False)
    assert f"pcp{pcp}={count}" in out.split(), out


# Raw frames of _INJECT: 14 + 4 (tag) + 24 bytes of payload, no padding
# on a veth.
INJECTED_WIRE_BYTES = 42


def test_interval_series_adds_up_to_the_totals_per_pcp(veth):
    """--interval: every matched frame in exactly one interval, in its
    PCP's slot, bytes counted with the tag the kernel stripped; the
    intervals tile the run from 0."""
    sink = _sink(veth, "-c", 500, "--interval", 100)
    _inject_tagged(veth, pcp=5, vid=100, flow=1, prio=0, count=300)
    _inject_tagged(veth, pcp=2, vid=100, flow=2, prio=0, count=200)
    got = _collect(sink)
    ivs = got["intervals"]
    assert {k: type(v) for k, v in ivs[0].items()} == {
        "t_s": float, "len_s": float, "pcp_frames": list, "pcp_bytes": list,
        "untagged_frames": int, "untagged_bytes": int}
    frames = [sum(iv["pcp_frames"][p] for iv in ivs) for p in range(8)]
    assert frames == [0, 0, 200, 0, 0, 300, 0, 0]
    assert [sum(iv["pcp_bytes"][p] for iv in ivs) for p in range(8)] == \
        [n * INJECTED_WIRE_BYTES for n in frames]
    assert [iv["t_s"] for iv in ivs] == \
        pytest.approx([i * 0.1 for i in range(len(ivs))])
    assert all(iv["len_s"] == pytest.approx(0.1) for iv in ivs[:-1])
    assert 0 < ivs[-1]["len_s"] <= 0.1 + 1e-9
    assert len(ivs) == int(got["elapsed_s"] / 0.1) + 1


def test_interval_series_follows_a_paced_sender(veth):
    """200 frames at 200/s: spread over the 250 ms intervals they were
    sent in, not lumped into one."""
    sink = _sink(veth, "-c", 200, "--interval", 250)
    _send(veth, "--count", 200, "--rate", 200, V4_B)
    ivs = _collect(sink)["intervals"]
    busy = [iv["untagged_frames"] for iv in ivs if iv["untagged_frames"]]
    assert sum(busy) == 200
    assert len(busy) >= 3, ivs


def test_interval_text_prints_a_line_per_interval(veth):
    """Text mode: one line per interval (its start, then each PCP that had
    frames with its bytes) before the totals."""
    sink = _sink(veth, "-c", 20, "--interval", 50, json_out=False)
    _inject_tagged(veth, pcp=6, vid=7, flow=1, prio=0, count=20)
    out = _collect(sink, json_out=False)
    lines = out[:out.index("priosink on vb:")].splitlines()
    assert lines and all(re.fullmatch(
        r"\s+\d+\.\d{3} s( pcp\d \d+ \(\d+ B\)| untagged \d+ \(\d+ B\))*",
        line) for line in lines), out
    starts = [float(line.split()[0]) for line in lines]
    assert starts == pytest.approx([i * 0.05 for i in range(len(lines))])
    counted = [(int(n), int(b)) for n, b in
               re.findall(r"pcp6 (\d+) \((\d+) B\)", out)]
    assert sum(n for n, _ in counted) == 20
    assert all(b == n * INJECTED_WIRE_BYTES for n, b in counted)


def test_rate_paces_the_sender(veth):
    count, rate = 200, 1000
    sent = _send(veth, "--count", count, "--rate", rate, V4_B)
    # A lower bound only: a slow machine may take longer, never less.
    assert sent["elapsed_s"] >= (count - 1) / rate


def test_priosink_stops_at_timeout_when_nothing_arrives(veth):
    timeout = 0.5
    got = _collect(_sink(veth, timeout=timeout))
    assert got["frames"] == 0
    assert got["elapsed_s"] >= timeout


def test_prioping_times_each_probe_and_names_the_lost(veth):
    """Three probes to the peer: each answered, RTTs in the order sent;
    three to an address nobody has: all lost (null), exit 1."""
    ping = ["nsenter", f"--net={NS_A}", veth["tools"] / "prioping", "-j",
            "-i", "0.05", "-c", "3", "-P", "5"]
    r = _run([*ping, V4_B])
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["sent"], got["received"], got["lost"], got["priority"]) == \
        (3, 3, 0, 5)
    rtts = [p["rtt_ms"] for p in got["probes"]]
    assert all(0 < x < 1000 for x in rtts)
    assert got["min_ms"] == min(rtts) and got["max_ms"] == max(rtts)
    sent = [p["t_s"] for p in got["probes"]]
    assert sent == sorted(sent) and sent[-1] - sent[0] >= 0.09
    nobody = V4_B.rsplit(".", 1)[0] + ".100"   # in the /26 (.64-.127), unused
    r = _run([*ping, "-W", "0.3", nobody])
    assert r.returncode == 1
    got = json.loads(r.stdout)
    assert (got["received"], got["lost"]) == (0, 3)
    assert [p["rtt_ms"] for p in got["probes"]] == [None] * 3


def test_tsc_khz_prints_a_plausible_frequency(tools):
    r = _run([tools / "tsc-khz"])
    assert r.returncode == 0, r.stderr
    assert 100_000 < int(r.stdout) < 10_000_000     # 100 MHz .. 10 GHz
