"""dcblab's plugin comes with `dcblab test` (or pytest's entry point once
dcblab is installed); this file adds what this project wants in a failed
test's report: the sender's DCB as iproute2 shows it."""


def pytest_dcblab_failure_evidence(item, labs):
    sections = []
    for lab in labs:
        if "sender" in lab.guests:
            ets = lab.sender.run(["dcb", "ets", "show", "dev", "eth0"],
                                 check=False)
            sections.append(("sender's ETS", ets.stdout or ets.stderr))
    return sections
