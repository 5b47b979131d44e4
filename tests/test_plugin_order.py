"""The order the plugin runs tests in: those that use the fabric lab come
after all the others, in their own order, so that its lab boots once for
all of them and its four guests do not idle under the rest."""

from dcblab.core.paths import ROOT


def _collected(pytester, monkeypatch, **files):
    """The test ids the plugin orders files' tests in (--collect-only)."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(**files)
    r = pytester.runpytest_subprocess("-p", "dcblab.testing.plugin", "-p",
                                      "no:cacheprovider", "--collect-only",
                                      "-q")
    assert r.ret == 0, r.stdout.str()
    return [line for line in r.outlines if "::" in line]


def test_fabric_tests_run_after_the_others_in_their_order(pytester,
                                                          monkeypatch):
    assert _collected(
        pytester, monkeypatch,
        test_a="def test_a1(fabric): pass\n\n\ndef test_a2(): pass\n",
        test_b="def test_b1(lab): pass\n\n\ndef test_b2(fabric): pass\n\n\n"
               "def test_b3(): pass\n") == [
        "test_a.py::test_a2", "test_b.py::test_b1", "test_b.py::test_b3",
        "test_a.py::test_a1", "test_b.py::test_b2"]


def test_a_module_with_a_fabric_fixture_of_its_own_is_not_the_fabrics(
        pytester, monkeypatch):
    """test_fabric_split.py's case: its fabric fixture gives the split
    lab of its topology marker. Its tests come after the fabric's, so
    that the fabric lab goes down after its own last test, not beside
    the split lab's measurements."""
    split = ROOT / "topology" / "dcb-fabric-split.toml"
    assert _collected(
        pytester, monkeypatch,
        test_a="def test_a1(fabric): pass\n",
        test_b="import pytest\n\n"
               f"pytestmark = pytest.mark.topology({str(split)!r})\n\n\n"
               "@pytest.fixture\ndef fabric():\n    return None\n\n\n"
               "def test_b1(fabric): pass\n\n\ndef test_b2(): pass\n",
        test_c="def test_c1(fabric): pass\n") == [
        "test_b.py::test_b2", "test_a.py::test_a1", "test_c.py::test_c1",
        "test_b.py::test_b1"]
