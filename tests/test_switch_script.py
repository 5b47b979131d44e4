"""run_script's one-line error (dcblab/lab/switch.py): the command that
failed and what it said, alone, never what earlier commands printed."""

from types import SimpleNamespace

import pytest

from dcblab.lab.runs import LabError
from dcblab.lab.switch import run_script


class _Machine:
    name = "sw"

    def __init__(self, rc, stderr):
        self.result = SimpleNamespace(rc=rc, stdout="", stderr=stderr)

    def run(self, argv, timeout, check):
        return self.result


def test_the_error_names_the_failed_command_and_only_its_words():
    # sh -x's trace of a script whose tc batch printed a warning before
    # the dcb command that failed (the error once seen in an up).
    stderr = ("+ tc -batch /tmp/qos\n"
              "Warning: sch_ets: something earlier said this\n"
              "+ dcb pfc set dev swp3 prio-pfc 3:on\n"
              "Attribute write: Protocol error\n")
    with pytest.raises(LabError) as e:
        run_script(_Machine(1, stderr), "tc -batch /tmp/qos\ndcb pfc ...")
    assert str(e.value) == ("sw: switch setup failed (rc 1) at `dcb pfc set "
                            "dev swp3 prio-pfc 3:on`: Attribute write: "
                            "Protocol error")


def test_a_silent_failure_says_so():
    with pytest.raises(LabError) as e:
        run_script(_Machine(1, "+ false\n"), "false")
    assert str(e.value).endswith("at `false`: no message")


def test_a_dscp_trusting_port_classifies_its_app_dscps_before_the_pcp():
    """topology/dcb-fabric.toml's ports trust DSCP: for each APP DSCP
    entry (26 -> 3, 46 -> 5) one flower filter per family, untagged and
    tagged, ahead (lower pref) of the eight PCP filters; a port that
    trusts the PCP has the PCP filters only."""
    import dataclasses

    from dcblab.core.paths import ROOT
    from dcblab.lab.switch import TRUST_PREF, trust_filters
    from dcblab.topology import load
    swp1 = load(ROOT / "topology" / "dcb-fabric.toml").host("sw").nic("swp1")
    lines = trust_filters(swp1)
    dscp = [ln for ln in lines if "ip_tos" in ln]
    assert len(dscp) == 2 * 4
    for d, prio in ((26, 3), (46, 5)):
        mine = [ln for ln in dscp if f"ip_tos {d << 2:#x}/0xfc " in ln]
        assert [ln.split(" pref ")[1].split()[0] for ln in mine] == \
            ["6", "7", "8", "9"]
        assert all(ln.endswith(f"skbedit priority {prio}") and
                   f"handle {d + 1} " in ln for ln in mine)
    assert "vlan_ethtype ipv4" in mine[2] and "vlan_ethtype ipv6" in mine[3]
    assert all(int(ln.split(" pref ")[1].split()[0]) < TRUST_PREF
               for ln in dscp)
    pcp = [ln for ln in lines if "vlan_prio" in ln]
    assert len(pcp) == 8 and lines[-8:] == pcp
    assert trust_filters(dataclasses.replace(swp1, trust="pcp")) == pcp
