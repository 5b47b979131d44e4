"""docs/writing-tests.md as a new user follows it: each example (a
```python block under `<!-- example: NAME.py -->`) is written, as the
page shows it, into an empty directory outside the checkout, and run
there with `dcblab test`; it must pass. A failing test of a user gets
its artefact folder beside the user's tests, not in the checkout."""

import re
import subprocess
import sys

from xml.etree import ElementTree

from dcblab.core import paths
from dcblab.core.paths import ROOT

DOC = ROOT / "docs" / "writing-tests.md"
DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]
_EXAMPLE = re.compile(r"^<!-- example: (\S+\.(?:py|toml|patch)) -->\n```"
                      r"(?:python|toml|diff)\n(.*?)^```", re.M | re.S)


def examples():
    return _EXAMPLE.findall(DOC.read_text())


def _dcblab_test(cwd, *args, timeout=600):
    return subprocess.run([*DCBLAB, "test", "-q", "-p", "no:cacheprovider",
                           *args], cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


def test_the_doc_has_examples():
    assert [name for name, _ in examples()] == [
        "test_first.py", "pair.toml", "test_pair.py", "test_fabric_ets.py",
        "my-change/0001-netprio-say-hello.patch",
        "my-change/test_my_change.py", "conftest.py"]


def _write_examples(where):
    """The page's files under where; {test file: its test names}."""
    tests = {}
    for name, code in examples():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(code)
        if name.split("/")[-1].startswith("test_"):
            tests[name] = re.findall(r"^def (test_\w+)\(", code, re.M)
    return tests


def _junit(path):
    """{test file: [test names]} of a junit XML report, all passed."""
    ran = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        assert all(c.tag == "properties" for c in case), \
            ElementTree.tostring(case)
        # (junit's xunit2 has no file attribute: classname is the module)
        ran.setdefault(case.get("classname").replace(".", "/") + ".py",
                       []).append(case.get("name"))
    return ran


def test_the_examples_pass_together_with_dcblab_test(tmp_path):
    """The page's files in one directory, one `dcblab test` there for all
    but the kernel change's (one session: each topology's lab boots
    once); the junit XML has every example's tests, passed, and the
    run's kernel."""
    tests = _write_examples(tmp_path)
    mine = {t: n for t, n in tests.items() if not t.startswith("my-change/")}
    r = _dcblab_test(tmp_path, "--junitxml=report.xml", *mine, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert _junit(tmp_path / "report.xml") == mine
    xml = ElementTree.parse(tmp_path / "report.xml").getroot()
    props = {p.get("name"): p.get("value")
             for p in xml.find("testsuite").find("properties")}
    assert props["dcblab_kernel"] == str(paths.boot_kernel())


def test_the_kernel_change_example_runs_on_the_patched_kernel(tmp_path):
    """The page's command for its patch: the kernel of the series plus
    that patch built (or found built), the test passing on it, and the
    run naming that kernel, not the lab kernel."""
    tests = _write_examples(tmp_path)
    test = "my-change/test_my_change.py"
    r = _dcblab_test(tmp_path, "--dcblab-patches", "my-change", test,
                     "--junitxml=report.xml", timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert _junit(tmp_path / "report.xml") == {test: tests[test]}
    kernel = re.search(r"^kernel (\S+) \(", r.stdout, re.M).group(1)
    assert "/variants/plus-" in kernel and kernel != str(paths.bzimage())


def test_a_users_failed_test_leaves_its_folder_beside_the_tests(tmp_path):
    (tmp_path / "test_fails.py").write_text(
        "def test_h2_says_no(lab):\n"
        "    assert lab.h2.run(['cat', '/proc/sys/net/ipv4/ip_forward'])"
        ".stdout == 'yes'\n")
    r = _dcblab_test(tmp_path, "test_fails.py")
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    folder = tmp_path / "dcblab-artefacts"
    reports = list(folder.glob("*/report.txt"))
    assert len(reports) == 1, (sorted(folder.rglob("*")), r.stdout[-2000:])
    assert "test_h2_says_no" in reports[0].read_text()
    assert str(folder) in r.stdout
