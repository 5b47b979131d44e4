"""The teaching labs' runner (dcblab.testing.labdoc, the sybil items of
dcblab.testing.labs_pytest, `dcblab lab`): the format's rules on host-side
text, then a sample lab (tests/data/labs/sample.md) run on the session's
lab, as written and edited to expect wrong output. Also: the course's
table of contents (docs/labs/README.md) names every lab with the verdict
the lab itself states."""

import json
import re
import subprocess
import sys

import pytest
from sybil.example import SybilFailure

from dcblab.core.paths import ROOT
from dcblab.testing import labdoc
from dcblab.testing.labdoc import LabDocError, check, parse, verdict
from dcblab.testing.labs_pytest import LABS_DIR, SYBIL

DCBLAB = [sys.executable, str(ROOT / "bin" / "dcblab")]
SAMPLE = ROOT / "tests" / "data" / "labs" / "sample.md"
LABS = sorted(LABS_DIR.glob("[0-9][0-9]-*.md"))


def _steps(text):
    return [s for b in parse(text, "t.md") for s in b.steps]


def _check(expected, output, rc=0, captures=None):
    step = _steps("```console\nh1# x\n" + expected + "\n```\n")[0]
    return check(step, rc, output, captures or {}, "t.md:2")


# --- the format, on the host ------------------------------------------------

def test_parse_steps_exit_status_continuation_and_lines():
    blocks = parse(SAMPLE.read_text(), SAMPLE)
    assert [b.line for b in blocks] == [7, 16]
    steps = [s for b in blocks for s in b.steps]
    assert [(s.host, s.line, s.rc) for s in steps] == [
        ("h1", 8, 0), ("h1", 10, 0), ("h1", 17, 0), ("h1", 20, 1),
        ("h1", 23, 0), ("host", 26, 0), ("h2", 28, 0)]
    assert steps[4].command == "ip -br link \\\nshow dev lo"
    assert steps[3].expected == ("bash: echo: write error: No such device",)
    assert blocks[1].prose.startswith("The index is captured")


@pytest.mark.parametrize("text, error", [
    ("```console\nh1# true\n", "t.md:1: console block not closed"),
    ("```console\nhello\nh1# true\n```\n", "t.md:2: output before any "
                                           "command line"),
    ("```console\nh1# echo \\\nnot continued\n```\n", "t.md:3: a command "
     "line ending in \\ continues"),
    ("```console\nh1# true\n([a-) (re)\n```\n", "t.md:3: bad (re) line"),
    ("```console\nh1# echo \\\n> x\nok\n([a-) (re)\n```\n",
     "t.md:5: bad (re) line"),
], ids=["unclosed", "output-first", "continuation", "bad-re",
        "bad-re-after-continuation"])
def test_format_mistakes_name_file_and_line(text, error):
    with pytest.raises(LabDocError, match=re.escape(error)):
        parse(text, "t.md")


def test_blocks_without_commands_and_other_languages_are_not_run():
    text = "```text\nh1# rm -rf /\n```\n```console\n$ ls\n```\n"
    with pytest.raises(LabDocError):   # console output without a command
        parse(text, "t.md")
    assert parse("```text\nh1# rm -rf /\n```\n", "t.md") == []


def test_exact_lines_and_exit_status():
    assert _check("a\nb", "a\nb\n").ok
    assert not _check("a\nb", "a\nc\n").ok
    assert not _check("a", "a\n", rc=1).ok           # no [1]: must exit 0
    assert _check("a\n[1]", "a\n", rc=1).ok
    o = _check("a\n[2]", "a\n", rc=1)
    assert not o.ok and "-[2]" in o.diff and "+[1]" in o.diff


def test_re_glob_ellipsis_and_captures():
    o = _check("pid (?P<pid>\\d+) (re)\nat * (glob)\n...\nend",
               "pid 812\nat 12:00:01 UTC\nx\ny\nend\n")
    assert o.ok and o.captured == {"pid": "812"}
    assert _check("...\nend", "end\n").ok              # ... may be no line
    assert not _check("pid \\d+ (re)", "pid 81 2\n").ok  # whole line only
    assert _check("kill {{pid}}: ok", "kill 812: ok\n", captures={
        "pid": "812"}).ok
    assert _check("(?P<x>a.c) {{pid}} (re)", "a.c 8.2\n", captures={
        "pid": "8.2"}).ok
    assert not _check("a {{pid}} (re)", "a 8x2\n", captures={
        "pid": "8.2"}).ok                                # captures are literal
    with pytest.raises(LabDocError, match=r"\{\{nope\}\} was not captured"):
        _check("{{nope}}", "x\n")


def test_bash_line_numbers_are_dropped_as_an_interactive_shell_shows():
    assert _check("bash: echo: write error: Invalid argument\n[1]",
                  "bash: line 1: echo: write error: Invalid argument\n",
                  rc=1).ok


def test_diff_marks_only_real_differences():
    o = _check("idx (?P<i>\\d+) (re)\nsame\nwant", "idx 7\nsame\ngot\n")
    assert not o.ok
    assert "--- t.md:2 (expected)" in o.diff
    lines = o.diff.splitlines()
    assert "-want" in lines and "+got" in lines
    assert " idx 7" in lines and " same" in lines   # a matching (re) line
    o = _check("fist\n...\nlast", "first\nsecond\nthird\nlast\n")
    lines = o.diff.splitlines()
    assert "-fist" in lines and "+first" in lines
    assert " second" in lines and "-..." not in lines  # what ... stood for


# --- the course ---------------------------------------------------------------

def test_every_lab_parses_states_a_verdict_and_uses_the_session_lab():
    assert LABS, "no lab in docs/labs"
    for lab in LABS:
        text = lab.read_text()
        blocks = parse(text, lab)
        assert blocks, f"{lab.name}: no console block with a command"
        assert verdict(text) in ("true", "false", "changed since"), \
            f"{lab.name}: no **Verdict**: **true|false|changed since**"
        assert "Linux 6.1" in text, f"{lab.name}: verdict without the " \
                                    "kernel version"
        hosts = {s.host for b in blocks for s in b.steps}
        assert hosts <= {"h1", "h2", "host"}, f"{lab.name}: {hosts}"
        # The suite runs every lab on its session lab, a two-hosts one.
        assert labdoc.topology_of(text) == "two-hosts", lab.name


def test_readme_lists_every_lab_with_its_verdict():
    readme = (LABS_DIR / "README.md").read_text()
    rows = dict(re.findall(r"^\|[^|]*\|\s*\[[^]]*\]\(([^)]+)\)\s*\|"
                           r"\s*\*\*([a-z ]+)\*\*", readme, re.M))
    assert sorted(rows) == [lab.name for lab in LABS]
    for lab in LABS:
        assert rows[lab.name] == verdict(lab.read_text()), lab.name


# --- on the lab -------------------------------------------------------------

def _evaluate(path, handle):
    """Every block of PATH as the suite evaluates it; the first failure."""
    doc = SYBIL.parse(path)
    doc.namespace["course"] = handle
    for example in doc:
        example.evaluate()


def _wrong(tmp_path):
    """The sample, with one expected line wrong: line 29's "first"."""
    lines = SAMPLE.read_text().split("\n")
    assert lines[28] == "first"
    lines[28] = "fist"
    wrong = tmp_path / "sample-wrong.md"
    wrong.write_text("\n".join(lines))
    return wrong


def test_sample_lab_passes_in_the_suite(lab):
    _evaluate(SAMPLE, lab)
    assert lab.h1.run(["cat", "/sys/fs/cgroup/net_prio/sample/"
                              "net_prio.prioidx"]).stdout.strip() != "1"


def test_wrong_expectation_fails_with_a_diff_naming_file_and_line(lab,
                                                                 tmp_path):
    wrong = _wrong(tmp_path)
    with pytest.raises(SybilFailure) as e:
        _evaluate(wrong, lab)
    text = str(e.value)
    assert f"{wrong}:28: h2# printf" in text
    assert f"--- {wrong}:28 (expected)" in text
    assert "\n-fist\n+first\n" in text
    assert "Traceback" not in text


def _dcblab(args, stdin="", timeout=120):
    return subprocess.run(DCBLAB + args, input=stdin, capture_output=True,
                          text=True, timeout=timeout)


def test_cli_runs_a_lab_pausing_before_each_command(lab):
    r = _dcblab(["lab", "--name", lab.name, str(SAMPLE)], stdin="\n" * 7)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.count("✓ as the lab says") == 7
    assert "h1# ip -br link \\\n> show dev lo\n" in out
    assert f"{SAMPLE}: 7 steps, all as the lab says" in out
    assert "stdin ended" not in out      # one Enter per command was read
    assert r.stderr == ""


def test_cli_shows_a_difference_as_a_diff_and_exits_1(lab, tmp_path):
    wrong = _wrong(tmp_path)
    r = _dcblab(["lab", "--name", lab.name, "--no-pause", str(wrong)])
    assert r.returncode == 1
    assert f"✗ not what the lab says ({wrong}:28):" in r.stdout
    assert "-fist\n+first\n" in r.stdout
    assert "1 not as the lab says (lines 28)" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
    j = _dcblab(["lab", "--name", lab.name, "-j", str(wrong)])
    assert j.returncode == 1
    res = json.loads(j.stdout)
    assert res["ok"] is False
    assert [s["line"] for s in res["steps"] if not s["ok"]] == [28]
    assert res["steps"][1]["output"][0].isdigit()


def test_cli_mistakes_are_one_line(lab, tmp_path):
    r = _dcblab(["lab", "--name", lab.name, str(tmp_path / "nope.md")])
    assert r.returncode == 2 and r.stderr.startswith("dcblab: lab: ") and \
        "no such file" in r.stderr and r.stderr.count("\n") == 1
    sw = tmp_path / "sw.md"
    sw.write_text("```console\nsw# true\n```\n")
    r = _dcblab(["lab", "--name", lab.name, str(sw)])
    assert r.returncode == 2 and "uses sw, not in lab" in r.stderr
    bad = tmp_path / "bad.md"
    bad.write_text("```console\nh1# true\n")
    r = _dcblab(["lab", "--name", lab.name, str(bad)])
    assert r.returncode == 2 and f"{bad}:1: console block not closed" in \
        r.stderr and r.stderr.count("\n") == 1


def test_a_lab_names_its_topology_two_hosts_by_default():
    assert labdoc.topology_of("# Lab\n\ntext\n") == "two-hosts"
    fabric = "# Lab\n<!-- topology: dcb-fabric -->\n"
    assert labdoc.topology_of(fabric) == "dcb-fabric"
    assert labdoc.topology_mismatch("x.md", fabric, "dcb-fabric") is None
    why = labdoc.topology_mismatch("x.md", fabric, "two-hosts")
    assert why.startswith("x.md is written for topology dcb-fabric, and "
                          "this lab runs two-hosts") and "\n" not in why


def test_cli_refuses_a_lab_of_another_topology_before_running_it(lab,
                                                                 tmp_path):
    f = tmp_path / "fabric-lab.md"
    f.write_text("# Lab\n<!-- topology: dcb-fabric -->\n\n```console\n"
                 "h1# touch /tmp/fabric-lab-ran\n```\n")
    r = _dcblab(["lab", "--name", lab.name, "--no-pause", str(f)])
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{f} is written for topology dcb-fabric, and this lab runs " \
        "two-hosts" in r.stderr
    assert lab.h1.run(["ls", "/tmp"]).stdout.split().count(
        "fabric-lab-ran") == 0
