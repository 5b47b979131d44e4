"""The console watcher end to end: a guest kernel really prints a splat
during a test, and that test fails with the kernel's lines quoted.

Each case runs an inner pytest session (pytester, in a subprocess) with
its own lab, so the outer session's guests stay clean.
"""

import pytest

from dcblab.core.paths import ROOT

INNER = '''
def test_body_passes_but_the_kernel_{name}(guest):
    guest.write("/proc/sysrq-trigger", "{key}")
    assert guest.run(["true"]).rc == 0
'''


@pytest.fixture
def inner(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))

    def run(name, key):
        pytester.makepyfile(**{f"test_inner_{name}":
                               INNER.format(name=name, key=key)})
        return pytester.runpytest_subprocess(
            "-p", "dcblab.testing.plugin", "-p", "no:cacheprovider",
            "--dcblab-artefacts", str(pytester.path / "artefacts"), timeout=180)
    return run


def test_backtrace_printed_by_the_guest_kernel_fails_the_running_test(inner):
    # sysrq "l": the kernel prints a backtrace of every active CPU, with a
    # "Call Trace:" the watcher knows. The test body itself passes.
    res = inner("prints_a_backtrace", "l")
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    quoted = out.split("kernel splat on h1's console:", 1)[1]
    assert quoted.lstrip().split("\n", 1)[0].endswith("] Call Trace:")
    # The quote carries the report's body, not only the matching line:
    # the trace of the write that triggered it.
    assert "write_sysrq_trigger" in quoted.split("console h1 (tail)")[0]
