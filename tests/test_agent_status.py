"""A guest command's exit status when qemu-guest-agent still holds the
entry of an earlier process with the same pid (dcblab.guest.agent,
Commands.status).

qemu-guest-agent keeps an entry per guest-exec, finds it by pid, oldest
first, and drops it only once it answered "exited" for it. A process whose
end nobody collected (a restore killed it, its waiter went away) leaves a
finished entry, and when the guest's pids wrap, a new process given that
pid got the old entry's status: in CI a ping "killed" (137) 16 ms after
its start, in the middle of tests/test_wire_faults.py's cable cut. The
first tests play the agent's entry list without a guest; the last makes
the collision in a real guest.
"""

import pytest

from dcblab.guest.agent import AgentError, Commands


class _Agent(Commands):
    """guest-exec and guest-exec-status as qemu-guest-agent 7.2 keeps
    them: entries in start order, the first of a pid answers, an answer
    saying "exited" drops it."""

    name = "fake"

    def __init__(self):
        self.entries = []     # [pid, status dict]
        self.calls = 0

    def start(self, pid, **status):
        self.entries.append([pid, status])

    def call(self, command, arguments=None, timeout=10.0):
        assert command == "guest-exec-status"
        self.calls += 1
        for e in self.entries:
            if e[0] == arguments["pid"]:
                if e[1].get("exited"):
                    self.entries.remove(e)
                return dict(e[1])
        raise AgentError(f"{self.name}: guest-exec-status: GenericError: "
                         "Invalid parameter 'pid'")


def test_an_old_entry_of_a_reused_pid_does_not_answer_for_the_new_one():
    a = _Agent()
    a.start(700, exited=True, signal=9)                  # never collected
    a.start(700, exited=True, exitcode=3, **{"out-data": "NzAwCg=="})
    r = a.wait(700, ["sh", "-c", "echo $$; exit 3"])
    assert (r.rc, r.stdout) == (3, "700\n")
    assert a.entries == []


def test_an_old_entry_is_passed_while_the_new_process_still_runs():
    a = _Agent()
    a.start(700, exited=True, signal=9)
    a.start(700, exited=False)
    assert a.status(700) == {"exited": False}
    assert a.entries == [[700, {"exited": False}]]


def test_a_pid_with_one_entry_costs_one_more_call_once_it_exited():
    a = _Agent()
    a.start(701, exited=True, exitcode=0)
    assert a.status(701) == {"exited": True, "exitcode": 0}
    assert a.calls == 2
    a.start(702, exited=False)
    assert a.status(702) == {"exited": False}
    assert a.calls == 3


def test_another_error_after_an_exited_status_is_raised():
    class Broken(_Agent):
        def call(self, command, arguments=None, timeout=10.0):
            if self.calls:
                raise AgentError("fake: guest-exec-status: no reply")
            return super().call(command, arguments, timeout)
    a = Broken()
    a.start(703, exited=True, exitcode=0)
    with pytest.raises(AgentError, match="no reply"):
        a.status(703)


# A shell loop that forks (a subshell, no exec) until the kernel's last
# pid (/proc/loadavg) is $1 ($2 "=") or at least $1 ($2 "-ge"): pids are
# handed out in turn, so the next process then gets the one after it.
_FORK_TO = ('while :; do read -r _ _ _ _ last < /proc/loadavg; '
            '[ "$last" "$2" "$1" ] && exit 0; ( : ); done')
# After pid_max the kernel hands pids out again from RESERVED_PIDS (300):
# with the last pid at least this, the next one is past that floor.
_WRAP_TO = 301


def test_a_reused_pid_gets_its_own_status_in_a_guest(guest):
    """A process killed without its status ever read (as the restore
    kills a leftover priosend) leaves its entry in the agent; a command
    that gets its pid after the pids wrapped reports its own exit code
    and output. Without Commands.status it reported the killed process's:
    rc 137 and no output."""
    pid_max = int(guest.read("/proc/sys/kernel/pid_max"))
    agent = guest.agent
    mark = "/tmp/agent-status-pid"
    # A pid below 300 (a guest just booted) is never handed out
    # again: first move past it.
    guest.run(["sh", "-c", _FORK_TO, "sh", str(_WRAP_TO), "-ge"],
              timeout=120)
    for attempt in range(3):
        pid = agent.spawn(["sleep", "600"])
        guest.run(["kill", "-KILL", str(pid)])
        guest.run(["rm", "-f", mark])
        # Round the pids (to pid_max, then from 300 again) to just below.
        guest.run(["sh", "-c", _FORK_TO, "sh", str(pid - 1), "="],
                  timeout=300)
        r = agent.exec(["sh", "-c", f"echo $$ > {mark}; echo $$; exit 3"])
        got = guest.run(["sh", "-c", f"while [ ! -s {mark} ]; do "
                         "sleep 0.05; done; cat " + mark],
                        timeout=10).stdout.strip()
        if got == str(pid):
            break
        # Something else took the pid first: collect the killed process's
        # entry, so that it cannot answer for a later process.
        assert agent.status(pid)["exited"]
    else:
        pytest.fail(f"3 times, another process took the pid first "
                    f"(pid_max {pid_max})")
    assert (r.rc, r.stdout) == (3, f"{pid}\n")
    print(f"pid {pid} again after a lap of pid_max {pid_max}: rc {r.rc}, "
          f"attempt {attempt + 1}")
