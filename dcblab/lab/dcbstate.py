"""The DCB a machine's ports run, against the topology file's, and put
back to it: what `dcblab reset` does for DCB on switches and on the hosts
facing them.

A switch port's DCB lives in its driver (dcbnl); lldpad, with dcbx =
true, keeps its own copy, advertises it and writes it to the driver on
its own time, and pfcd makes the port's ets qdisc follow the driver
(tools/pfcd.c). So a switch's DCB goes back to the file in that order:
lldpad stopped (it would write its copy back), the drivers given the
file's ETS, PFC and APP (the APP table flushed first: entries added by
hand go), lldpad started fresh and given the file's TLVs, then the wait
until lldpad's PFC and pfcd's qdiscs are the file's. A host facing a
switch (dcbx) takes its DCB from the switch (willing); one that runs
another is given its lldpad configuration again and, if that is not
enough, a fresh lldpad, with the switch port re-advertising its APP
entries (dcblab.lab.keeper does the same after a host restarts).
"""

import json
import time

from .dcbx import (app_readvertise_script, dcbx_script, pfc_applied_script,
                   start_lldpad, stop_lldpad)
from .switch import dcb_batch, enforced_script, run_script

__all__ = ["read_dcb", "dcb_batch_lines", "parse_dcb_batch", "file_dcb",
           "share_words", "describe_dcb", "reset_switch_dcb", "reset_host_dcb"]

# Full path: busybox sh runs its own applets before PATH.
DCB = "/sbin/dcb"

# How long a host facing a switch is given to adopt its DCB by DCBX.
_ADOPT_S = 10.0


def dcb_batch_lines(devs):
    """`dcb -j -b -` input reading each device's ETS and PFC."""
    return "".join(f"ets show dev {d}\npfc show dev {d} prio-pfc\n"
                   for d in devs)


def parse_dcb_batch(text, devs):
    """{dev: {prio_tc, tc_tsa, tc_bw, pfc}} from `dcb -j -b`'s output for
    dcb_batch_lines(devs) (its objects, comma-separated); a device whose
    two objects did not print is absent."""
    try:
        objs = json.loads("[" + text.strip() + "]")
    except ValueError:
        return {}
    out = {}
    for i, dev in enumerate(devs):
        if 2 * i + 1 >= len(objs):
            break
        ets, pfc = objs[2 * i], objs[2 * i + 1]
        try:
            out[dev] = dict(prio_tc=list(ets["prio_tc"]),
                            tc_tsa=list(ets["tc_tsa"]),
                            tc_bw=list(ets["tc_bw"]),
                            pfc=[p for p, on in enumerate(pfc["prio_pfc"])
                                 if on])
        except (KeyError, TypeError):
            continue
    return out


def read_dcb(machine, devs):
    """{dev: {prio_tc, tc_tsa, tc_bw, pfc}} as the ports run them (one
    `dcb -j -b`); a device dcb could not read is absent."""
    if not devs:
        return {}
    res = machine.run([DCB, "-j", "-b", "-"], input=dcb_batch_lines(devs),
                      check=False)
    return parse_dcb_batch(res.stdout, devs)


def file_dcb(dcb):
    """A PortDcb as read_dcb gives a port's (the keys `dcb -j` uses)."""
    return dict(prio_tc=list(dcb.prio_tc), tc_tsa=list(dcb.tsa),
                tc_bw=list(dcb.bw), pfc=list(dcb.pfc))


def share_words(d):
    """Per TC in use (0 to the highest a priority maps to), its share in
    percent, or "str" for a strict one (any TSA but ets)."""
    return [str(d["tc_bw"][tc]) if d["tc_tsa"][tc] == "ets" else "str"
            for tc in range(max(d["prio_tc"]) + 1)]


def describe_dcb(d):
    """"tc-bw 20 30 50 str, prio-tc 0 0 1 2 0 3 0 0, pfc 3": the TCs in
    use (str: strict)."""
    bw = " ".join(share_words(d))
    return (f"tc-bw {bw}, prio-tc {' '.join(map(str, d['prio_tc']))}, "
            f"pfc {','.join(map(str, d['pfc'])) or 'none'}")


def reset_switch_dcb(machine, host, dcbx):
    """A switch's DCB ports back to the file's configuration (see the
    module's doc); returns what it found changed and what it did."""
    ports = [p for p in host.nics if p.dcb]
    if not ports:
        return []
    before = read_dcb(machine, [p.name for p in ports])
    done = [f"{p.name}: DCB was {describe_dcb(before[p.name])}; now the "
            f"file's {describe_dcb(file_dcb(p.dcb))}"
            for p in ports if p.name in before
            and before[p.name] != file_dcb(p.dcb)]
    if dcbx:
        stop_lldpad(machine)
    sh = []
    for p in ports:
        sh.append(f"{DCB} app flush dev {p.name}")
        sh += [f"{DCB} {line}" for line in dcb_batch(p)]
    run_script(machine, "\n".join(sh) + "\n", "switch DCB reset")
    if dcbx:
        start_lldpad(machine)
        run_script(machine, dcbx_script(host) + pfc_applied_script(host)
                   + enforced_script(host), "DCBX port setup")
        done.append("lldpad started again with the file's ETS, PFC and "
                    "APP on " + ", ".join(p.name for p in ports))
    else:
        run_script(machine, enforced_script(host), "ets qdiscs")
    return done


def _expected(topology, nic):
    """The DCB a host NIC facing a switch port should adopt: the port's
    in the file, or None when the port has none."""
    sw, port = nic.peer.split(":")
    dcb = topology.host(sw).nic(port).dcb
    return (sw, port, file_dcb(dcb)) if dcb else None


def _wait_adopted(machine, want, timeout):
    deadline = time.monotonic() + timeout
    while True:
        got = read_dcb(machine, list(want))
        if all(got.get(d) == w for d, w in want.items()):
            return {}
        if time.monotonic() >= deadline:
            return {d: got.get(d) for d, w in want.items()
                    if got.get(d) != w}
        time.sleep(0.5)


def reset_host_dcb(machine, host, topology, lab):
    """A host's NICs facing a switch (dcbx) back to the file's DCB: their
    lldpad configuration given again, then, for a NIC that still runs
    another DCB, a fresh lldpad and its switch port's APP re-advertised.
    lab.machine(name) gives the switch. Returns (what it did, what it
    could not: a NIC whose switch port runs another DCB than the file's,
    or one that did not adopt it)."""
    nics = [n for n in host.nics if n.peer_is_switch]
    want = {}
    for n in nics:
        exp = _expected(topology, n)
        if exp:
            want[n.name] = exp
    if not want:
        return [], []
    done, failed = [], []
    sws = {}
    for dev, (sw, port, _) in want.items():
        got = read_dcb(lab.machine(sw), [port]).get(port)
        if got is not None and got != want[dev][2]:
            failed.append(f"{dev}: its switch port {sw}:{port} runs "
                        f"{describe_dcb(got)}, not the file's: `dcblab "
                        f"reset {sw}` puts it back, and {host.name} adopts "
                        "it")
        else:
            sws.setdefault(sw, []).append(port)
    script = dcbx_script(host)
    if script:
        run_script(machine, script, "DCBX port setup")
    check = {dev: w[2] for dev, w in want.items() if w[1] in
             sws.get(w[0], ())}
    wrong = _wait_adopted(machine, check, 1.0) if check else {}
    if not wrong:
        return done, failed
    for dev, got in wrong.items():
        done.append(f"{dev}: ran {describe_dcb(got) if got else '?'}; "
                    "lldpad started again to adopt its switch port's")
    stop_lldpad(machine)
    start_lldpad(machine)
    run_script(machine, dcbx_script(host), "DCBX port setup")
    for dev in wrong:
        sw, port, _ = want[dev]
        script = app_readvertise_script(topology.host(sw).nic(port))
        if script:
            run_script(lab.machine(sw), script, "APP re-advertise")
    still = _wait_adopted(machine, {d: check[d] for d in wrong}, _ADOPT_S)
    failed += [f"{dev}: still runs {describe_dcb(got) if got else '?'} "
             f"{_ADOPT_S:g} s after: DCBX did not give it the file's"
               for dev, got in still.items()]
    return done, failed
