"""examples/my-dcb-tests, a project of its own, run as its README says:
`dcblab test DIR` from another directory. Its topology boots once for
its tests; each passes; a failure would put its folder beside the tests
(here: --dcblab-artefacts, so the checkout stays clean)."""

import re
import subprocess
import sys
from xml.etree import ElementTree

from dcblab.core.paths import ROOT

EXAMPLE = ROOT / "examples" / "my-dcb-tests"


def _tests():
    """{module: [test names as junit names them]} from the example's files:
    a parametrized test once per parameter."""
    found = {}
    for f in sorted(EXAMPLE.glob("test_*.py")):
        text = f.read_text()
        names = []
        for m in re.finditer(r"(?:^@pytest\.mark\.parametrize\(\"\w+\", "
                             r"\[(.*?)\]\)\n)?^def (test_\w+)\(", text,
                             re.M):
            params, name = m.groups()
            names += [f"{name}[{p.strip()}]" for p in params.split(",")] \
                if params else [name]
        found[f.stem] = sorted(names)
    return found


def test_the_example_project_passes_with_dcblab_test_from_elsewhere(
        tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "bin" / "dcblab"), "test", "-q",
         "-p", "no:cacheprovider", "--junitxml", str(tmp_path / "r.xml"),
         "--dcblab-artefacts", str(tmp_path / "artefacts"), str(EXAMPLE)],
        cwd=tmp_path, capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    ran = {}
    for case in ElementTree.parse(tmp_path / "r.xml").getroot().iter(
            "testcase"):
        assert all(c.tag == "properties" for c in case), \
            ElementTree.tostring(case)
        ran.setdefault(case.get("classname"), []).append(case.get("name"))
    assert {k: sorted(v) for k, v in ran.items()} == _tests()
    # One lab, of the example's topology, for all of them.
    assert re.findall(r"^lab (\S+) \((\S+)\): up in", r.stdout, re.M) == [
        (re.search(r"^lab (my-lab-\d+) ", r.stdout, re.M).group(1),
         str(EXAMPLE / "lab.toml"))], r.stdout[-2000:]
