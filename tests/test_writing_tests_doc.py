"""docs/writing-tests.md as a new user follows it: each example (a
```python block under `<!-- example: NAME.py -->`) is written, as the
page shows it, into an empty directory outside the checkout, and run
there with `dcblab test`; it must pass. A failing test of a user gets
its artefact folder beside the user's tests, not in the checkout."""

import re
import subprocess
import sys

import pytest

from dcblab.core.paths import ROOT

DOC = ROOT / "docs" / "writing-tests.md"
DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]
_EXAMPLE = re.compile(r"^<!-- example: (\S+\.py) -->\n```python\n(.*?)^```",
                      re.M | re.S)


def examples():
    return _EXAMPLE.findall(DOC.read_text())


def _dcblab_test(cwd, *args, timeout=600):
    return subprocess.run([*DCBLAB, "test", "-q", "-p", "no:cacheprovider",
                           *args], cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


def test_the_doc_has_examples():
    assert [name for name, _ in examples()] == ["test_first.py"]


@pytest.mark.parametrize("name,code", examples(),
                         ids=[n for n, _ in examples()])
def test_each_example_passes_with_dcblab_test(tmp_path, name, code):
    (tmp_path / name).write_text(code)
    r = _dcblab_test(tmp_path, name)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert re.search(r"\b1 passed\b", r.stdout), r.stdout[-2000:]


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
