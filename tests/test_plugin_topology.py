"""The topology marker and --dcblab-topology: which lab a test's ``lab``
is, the order tests run in, and the one-line errors of a marker or option
that names no topology or a bad one. All in inner pytest sessions
(--collect-only: nothing boots), but the last, which boots a topology of
its own for two tests."""

import re
import shutil

import pytest

from dcblab.core.paths import ROOT, TOPOLOGY_DIR
from dcblab.lab.runs import lab_dir

BAD = ROOT / "tests" / "topology" / "bad" / "cpus-0.toml"


@pytest.fixture
def inner(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))

    def run(*args, timeout=120):
        return pytester.runpytest_subprocess(
            "-p", "dcblab.testing.plugin", "-p", "no:cacheprovider", *args,
            timeout=timeout)
    return run


def _mine(pytester, name="mine", lab_name="my-lab"):
    """A copy of two-hosts.toml in the test directory, named lab_name."""
    text = (TOPOLOGY_DIR / "two-hosts.toml").read_text()
    text = re.sub(r'^name = "two-hosts"$', f'name = "{lab_name}"', text,
                  flags=re.M)
    (pytester.path / f"{name}.toml").write_text(text)


def _collected(r):
    return [line for line in r.outlines if "::" in line]


def test_tests_run_grouped_by_topology_in_first_collected_order(pytester,
                                                                inner):
    _mine(pytester)
    pytester.makepyfile(
        test_a="import pytest\n\n\n"
               "@pytest.mark.topology('mine.toml')\n"
               "def test_a1(lab): pass\n\n\n"
               "def test_a2(fabric): pass\n\n\n"
               "def test_a3(lab): pass\n",
        test_b="import pytest\n\n"
               "pytestmark = pytest.mark.topology('mine')\n\n\n"
               "def test_b1(lab): pass\n\n\n"
               "def test_b2(): pass\n")
    r = inner("--collect-only", "-q")
    assert r.ret == 0, r.stdout.str()
    assert _collected(r) == [
        "test_a.py::test_a3", "test_b.py::test_b2",     # default, none
        "test_a.py::test_a1", "test_b.py::test_b1",     # mine.toml
        "test_a.py::test_a2"]                           # dcb-fabric


def test_a_marker_on_a_class_is_its_tests_topology(pytester, inner):
    _mine(pytester)
    pytester.makepyfile(
        test_c="import pytest\n\n\n"
               "@pytest.mark.topology('mine.toml')\n"
               "class TestMine:\n"
               "    def test_c1(self, lab): pass\n\n\n"
               "def test_c2(lab): pass\n")
    r = inner("--collect-only", "-q")
    assert r.ret == 0, r.stdout.str()
    assert _collected(r) == ["test_c.py::test_c2",
                             "test_c.py::TestMine::test_c1"]


def test_a_marker_naming_a_bad_topology_is_one_collection_error(pytester,
                                                                inner):
    """The error of the file itself (tests/topology/bad/: its expected
    line names the file and the key), as the test file's collection
    error; the other files still collect."""
    shutil.copy(BAD, pytester.path / "bad.toml")
    pytester.makepyfile(
        test_bad="import pytest\n\n\n"
                 "@pytest.mark.topology('bad.toml')\n"
                 "def test_x(lab): pass\n",
        test_good="def test_y(lab): pass\n")
    r = inner("--collect-only", "-q")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.INTERRUPTED, out
    assert "ERROR collecting test_bad.py" in out
    expected = BAD.read_text().splitlines()[0].removeprefix("# expect: ")
    expected = expected.replace(str(BAD.relative_to(ROOT)),
                                str(pytester.path / "bad.toml"))
    assert f"test_bad.py::test_x: {expected}" in r.outlines, out
    assert "test_good.py::test_y" in r.outlines
    assert "1 error" in out


def test_a_marker_naming_no_file_says_where_it_looked(pytester, inner):
    pytester.makepyfile(
        test_none="import pytest\n\n\n"
                  "@pytest.mark.topology('nowhere')\n"
                  "def test_x(lab): pass\n")
    r = inner("--collect-only", "-q")
    assert r.ret == pytest.ExitCode.INTERRUPTED, r.stdout.str()
    line = (f"test_none.py::test_x: topology 'nowhere': no file "
            f"{pytester.path / 'nowhere.toml'} (nor one of dcblab's own: "
            "dcb-fabric, dcb-fabric-split, two-hosts)")
    assert line in r.outlines, r.stdout.str()


def test_an_unknown_default_topology_stops_the_run_in_one_line(pytester,
                                                               inner):
    pytester.makepyfile(test_d="def test_d(lab): pass\n")
    r = inner("--dcblab-topology", "nowhere.toml")
    assert r.ret == 2
    assert r.errlines[-1:] == [
        f"Exit: dcblab: topology 'nowhere.toml': no file "
        f"{pytester.path / 'nowhere.toml'} (nor one of dcblab's own: "
        "dcb-fabric, dcb-fabric-split, two-hosts)"], r.stderr.str()


def test_tests_of_one_topology_share_its_lab_restored_between(pytester,
                                                              inner):
    """A topology of the user's, with hosts of its own names: one boot
    for both tests (the same boot_id), the first test's qdisc gone in
    the second, the lab down at the end, and the summary names it. The
    default topology's lab, used by a test of another file that runs
    first, is down by then: its last test was over."""
    text = (TOPOLOGY_DIR / "two-hosts.toml").read_text()
    text = re.sub(r'^name = "two-hosts"$', 'name = "pair"', text, flags=re.M)
    text = text.replace("h1", "left").replace("h2", "right")
    (pytester.path / "pair.toml").write_text(text)
    pytester.makepyfile(test_default="""
def test_on_the_default_lab(lab):
    assert lab.name.startswith("pytest-")
""", test_pair="""
import os

import pytest

from dcblab.lab.runs import lab_dir

pytestmark = pytest.mark.topology("pair.toml")
BOOT = "/proc/sys/kernel/random/boot_id"
seen = []


def test_first_adds_a_qdisc(lab):
    assert not lab_dir(f"pytest-{os.getpid()}").exists()
    seen.append(lab.left.read(BOOT))
    lab.left.run(["tc", "qdisc", "replace", "dev", "eth0", "root",
                  "handle", "1:", "prio"])


def test_second_sees_the_same_boot_and_no_qdisc(lab):
    assert lab.left.read(BOOT) == seen[0]
    assert " prio " not in lab.left.run(["tc", "qdisc", "show", "dev",
                                         "eth0"]).stdout
    assert lab.right.run(["uname", "-n"]).stdout.strip() == "right"
""")
    r = inner("-q", timeout=600)
    out = r.stdout.str()
    assert r.ret == 0, out
    r.assert_outcomes(passed=3)
    assert re.search(r"^lab pair-\d+ \(" + re.escape(str(
        pytester.path / "pair.toml")) + r"\): up in [\d.]+ s$", out, re.M), out
    names = re.findall(r"^lab (\S+) ", out, re.M)
    assert [n.split("-")[0] for n in names] == ["pytest", "pair"]
    assert not any(lab_dir(n).exists() for n in names)
