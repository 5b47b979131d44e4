"""lldpad in a guest: the LLDP and DCBX agent a lab with ``dcbx = true``
runs in every guest, through the guest's ``dcblab-lldpad`` script
(guest-image/lldpad); and dcbapp-netprio, the daemon that turns the APP
entries DCBX installs into net_prio cgroups, started where it is wanted
(the APP chain scenario, ``dcblab demo dcbx``) through ``dcblab-dcbapp``
(guest-image/dcbapp)."""

from ..core.cmd import CmdError
from .runs import LabError

__all__ = ["LLDPAD_LOG", "start_lldpad", "dcbx_script", "ets_tlv_args",
           "app_readvertise_script", "stop_lldpad", "lldpad_pid",
           "DCBAPP_LOG", "start_dcbapp", "stop_dcbapp", "dcbapp_pid",
           "pfc_applied_script"]

# In the guest; kept across restarts of lldpad (failure reports read it).
LLDPAD_LOG = "/run/lldpad.log"
DCBAPP_LOG = "/run/dcbapp-netprio.log"
# dcblab-lldpad bounds its own wait for `lldptool -p` at 10 s; the agent
# waits a little longer, so the script's error is the one reported.
_START_TIMEOUT = 20.0


def _script(machine, verb, timeout, script="dcblab-lldpad", args=()):
    try:
        return machine.run([script, verb, *args], timeout=timeout)
    except CmdError as e:
        why = (e.stderr or e.stdout).strip() or f"exit {e.rc}"
        raise LabError(f"{machine.name}: {script} {verb} failed "
                       f"(rc {e.rc}): {why}") from None


def start_lldpad(machine):
    """Start lldpad with fresh state; returns once `lldptool -p` answers
    in the guest. Raises LabError with the script's message (which names
    what it awaited and ends with lldpad's last log lines)."""
    _script(machine, "start", _START_TIMEOUT)


def stop_lldpad(machine):
    """Stop lldpad and remove its state (nothing if it is not running)."""
    _script(machine, "stop", 15.0)


def lldpad_pid(machine):
    """lldpad's pid in the guest, or None if it is not running."""
    res = machine.run(["dcblab-lldpad", "status"], check=False)
    return int(res.stdout) if res.rc == 0 else None


def start_dcbapp(machine, *args):
    """Start dcbapp-netprio (with --cleanup, logging to DCBAPP_LOG, args
    added: e.g. "--dev", "eth0"); returns once it logged that it listens.
    LabError with the script's message otherwise."""
    _script(machine, "start", 15.0, "dcblab-dcbapp", args)


def stop_dcbapp(machine):
    """Stop dcbapp-netprio (SIGTERM: its empty cgdcbx-* cgroups go)."""
    _script(machine, "stop", 15.0, "dcblab-dcbapp")


def dcbapp_pid(machine):
    """dcbapp-netprio's pid in the guest, or None if it is not running."""
    res = machine.run(["dcblab-dcbapp", "status"], check=False)
    return int(res.stdout) if res.rc == 0 else None


LLDPTOOL = "/usr/sbin/lldptool"


def ets_tlv_args(prio_tc, tsa, bw):
    """lldptool's ETS-CFG / ETS-REC arguments for one ETS configuration
    (each a sequence of 8, as in PortDcb and `dcb -j ets show`)."""
    return ["tsa=" + ",".join(f"{tc}:{t}" for tc, t in enumerate(tsa)),
            "up2tc=" + ",".join(f"{p}:{tc}" for p, tc in enumerate(prio_tc)),
            "tcbw=" + ",".join(map(str, bw))]


def dcbx_script(host):
    """lldptool commands (one sh script) making host's ports what a DCB
    fabric wants, or "" if nothing: a switch port with a DCB configuration
    is unwilling and advertises it (ETS-CFG, ETS-REC, PFC, APP); a host
    NIC facing a switch is willing (ETS, PFC) and advertises no APP (it
    learns APP from the switch; see dcblab.testing.dcb.dcbx_port on why
    only one end sends APP). Host-to-host links stay as lldpad starts
    them: the two-host tests configure both ends themselves."""
    sh = []

    def tool(dev, tlv, *args):
        sh.append(" ".join([LLDPTOOL, "-T", "-i", dev, "-V", tlv, *args])
                  + " >/dev/null")
    for nic in host.nics:
        if host.is_switch and nic.dcb:
            d = nic.dcb
            ets = ets_tlv_args(d.prio_tc, d.tsa, d.bw)
            tool(nic.name, "ETS-CFG", "willing=no", "enableTx=yes", *ets)
            tool(nic.name, "ETS-REC", "enableTx=yes", *ets)
            tool(nic.name, "PFC", "willing=no", "enableTx=yes",
                 "enabled=" + (",".join(map(str, d.pfc)) or "none"))
            for a in d.apps:
                tool(nic.name, "APP", f"app={a.priority},{a.sel},{a.protocol}")
            tool(nic.name, "APP", "enableTx=yes")
        elif not host.is_switch and nic.peer_is_switch:
            tool(nic.name, "ETS-CFG", "willing=yes", "enableTx=yes")
            tool(nic.name, "PFC", "willing=yes", "enableTx=yes")
    return "\n".join(sh) + "\n" if sh else ""


def pfc_applied_script(host, timeout=10):
    """sh waiting until lldpad gave each of a switch's DCB ports' drivers
    the topology's PFC enable bits (exit 1, naming the port, if not within
    timeout seconds): lldpad applies its configuration on its own time,
    and a port it has not reached yet has PFC off (seen: swp3 after a
    fabric's `up`), which would make the lossless class lossy."""
    want = {p.name: "prio-pfc " + " ".join(
        f"{i}:{'on' if i in p.dcb.pfc else 'off'}" for i in range(8))
        for p in host.nics if p.dcb}
    if not want:
        return ""
    checks = " && ".join(f"/sbin/dcb pfc show dev {dev} | grep -q '{line} '"
                         for dev, line in want.items())
    return (f"i=0; until {checks}; do i=$((i + 1)); "
            f"if [ $i -gt {timeout * 10} ]; then echo 'PFC of "
            f"{' '.join(want)} not applied by lldpad in {timeout} s' >&2; "
            "exit 1; fi; sleep 0.1; done\n")


def app_readvertise_script(port):
    """lldptool commands withdrawing and re-adding a switch port's APP
    entries: the peer (a host whose lldpad restarted) installs peer APP
    entries when the APP TLV changes, not from an unchanged one."""
    sh = []
    for a in port.dcb.apps if port.dcb else ():
        entry = f"app={a.priority},{a.sel},{a.protocol}"
        sh.append(f"{LLDPTOOL} -T -i {port.name} -V APP -d {entry} >/dev/null")
        sh.append(f"{LLDPTOOL} -T -i {port.name} -V APP {entry} >/dev/null")
    return "\n".join(sh) + "\n" if sh else ""
