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
