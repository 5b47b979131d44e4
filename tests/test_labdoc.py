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
PREDICT = ROOT / "tests" / "data" / "labs" / "predict.md"
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


def test_a_prediction_belongs_to_the_block_after_it():
    blocks = parse(PREDICT.read_text(), PREDICT)
    p = [b.predict for b in blocks]
    assert [(q.line, q.answer) for q in p] == [(6, "b"), (15, "b")]
    assert p[0].question == "Which index does net_prio's root cgroup have?"
    assert p[0].choices == (("a", "0"), ("b", "1"), ("c", "2"))
    assert p[1].question == ("Does a map entry for a device h1 does not "
                             "have succeed?")     # over two lines
    assert p[1].why == "write_priomap() looks the name up and returns ENODEV"
    assert labdoc.predictions(blocks) == p


_Q = "**Predict:** Q?\n(a) x (b) y\n"
_BLOCK = "```console\nh1# true\n```\n"


@pytest.mark.parametrize("text, error", [
    (_Q + _BLOCK, "t.md:1: **Predict:** with no `<!-- answer"),
    (_Q + "<!-- answer: c: no -->\n" + _BLOCK,
     "t.md:3: the answer (c) is not one of the choices (a, b)"),
    (_Q + "<!-- answer b -->\n" + _BLOCK, "t.md:3: the answer line is"),
    ("**Predict:** Q?\n(a) x (c) y\n<!-- answer: a: w -->\n" + _BLOCK,
     "t.md:1: a **Predict:** question has choices (a), (b), ... in order"),
    ("**Predict:** Q?\n(a) x\n<!-- answer: a: w -->\n" + _BLOCK,
     "two at least"),
    (_Q + "<!-- answer: a: w -->\n" + _Q + "<!-- answer: a: w -->\n" +
     _BLOCK, "t.md:4: a second **Predict:** before the same console block"),
    ("<!-- answer: a: w -->\n" + _BLOCK, "t.md:1: an answer with no "
                                         "**Predict:** question before it"),
    (_BLOCK + "\n" + _Q + "<!-- answer: a: w -->\n",
     "t.md:5: a **Predict:** question with no console block after it"),
], ids=["no-answer", "answer-not-a-choice", "answer-format", "order",
        "one-choice", "two-questions", "answer-alone", "question-last"])
def test_prediction_mistakes_name_file_and_line(text, error):
    with pytest.raises(LabDocError, match=re.escape(error)):
        parse(text, "t.md")


_PLANTED_Q = ("**Predict:** Which?\n(a) x (b) y\n<!-- answer: planted -->\n"
              + _BLOCK)
_CAUSE_A = "<!-- cause a: x\nh1# true\nfix:\nh1# true\n-->\n"
_CAUSE_B = "<!-- cause b: y\nh1# true\nfix:\nh1# true\n-->\n"


def test_a_troubleshooting_labs_causes_plant_and_fix():
    text = ("<!-- plant -->\n" + _BLOCK + _CAUSE_A + _CAUSE_B + _PLANTED_Q)
    found = labdoc.causes(text, "t.md")
    assert [(c.letter, c.text, c.line) for c in found] == [
        ("a", "x", 5), ("b", "y", 10)]
    assert [s.line for s in found[0].plant] == [6]
    assert [s.line for s in found[0].fix] == [8]
    blocks = parse(text, "t.md")
    assert blocks[0].plant and not blocks[1].plant
    assert blocks[1].predict.planted and blocks[1].predict.answer is None
    assert labdoc.causes("# no causes\n" + _BLOCK, "t.md") == []


@pytest.mark.parametrize("text, error", [
    ("<!-- plant -->\n" + _BLOCK + "<!-- cause a: x\nh1# true\n-->\n" +
     _CAUSE_B + _PLANTED_Q, "t.md:5: a cause has one `fix:` line"),
    ("<!-- plant -->\n" + _BLOCK + "<!-- cause a: x\nh1# true\nfix:\n",
     "t.md:5: a cause's comment ends with a line `-->`"),
    (_PLANTED_Q, "planted, but the lab has no `<!-- cause X: ...` comment"),
    (_BLOCK + _CAUSE_A + _CAUSE_B + _PLANTED_Q, "one `<!-- plant -->`"),
    ("<!-- plant -->\n" + _BLOCK + _CAUSE_A + _PLANTED_Q,
     "the planted question's choices (a, b) are the causes' letters (a)"),
    (_CAUSE_A + _CAUSE_B + _PLANTED_Q + "<!-- plant -->\n" + _BLOCK,
     "the cause is planted before the question about it"),
], ids=["no-fix", "unclosed", "no-causes", "no-plant", "letters", "late"])
def test_troubleshooting_mistakes_are_named(text, error):
    with pytest.raises(LabDocError, match=re.escape(error)):
        labdoc.causes(text, "t.md")


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

# The suite runs each lab on a session lab of its topology.
SESSION_HOSTS = {"two-hosts": {"h1", "h2"},
                 "dcb-fabric": {"h1", "h2", "h3", "sw"}}


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
        topology = labdoc.topology_of(text)
        assert topology in SESSION_HOSTS, f"{lab.name}: {topology}"
        hosts = {s.host for b in blocks for s in b.steps}
        assert hosts <= SESSION_HOSTS[topology] | {"host"}, \
            f"{lab.name}: {hosts}"


def test_every_lab_asks_before_it_shows_and_gives_the_verdict_after():
    for lab in LABS:
        text = lab.read_text()
        blocks = parse(text, lab)
        asked = labdoc.predictions(blocks)
        assert asked, f"{lab.name}: no **Predict:** question"
        # The verdict would give the answers away: it comes after the
        # last experiment, with What it means.
        at = text.index("**Verdict")
        assert text[:at].count("\n") + 1 > asked[-1].line, lab.name
        assert "## What it means" in text[at:], lab.name


def test_readme_gives_each_labs_answers_for_the_teacher():
    readme = (LABS_DIR / "README.md").read_text()
    rows = dict(re.findall(r"^- \[([\w.-]+)\]\([\w.-]+\): (.*)$", readme,
                           re.M))
    assert sorted(rows) == [lab.name for lab in LABS]
    # The teacher's table: | N | run | steps | questions | ...
    table = {int(n): (int(steps), int(qs)) for n, steps, qs in re.findall(
        r"^\| (\d+) \| [\d.]+ s \| (\d+) \| (\d+) \|", readme, re.M)}
    for lab in LABS:
        blocks = parse(lab.read_text(), lab)
        asked = labdoc.predictions(blocks)
        assert rows[lab.name] == ", ".join(
            f"{i}. ({'planted' if q.planted else q.answer})"
            for i, q in enumerate(asked, 1)), lab.name
        assert table[int(lab.name[:2])] == (
            sum(len(b.steps) for b in blocks), len(asked)), lab.name


def test_teacher_prints_the_answers_without_a_lab():
    r = _dcblab(["lab", "--teacher", str(PREDICT)])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{PREDICT}: verdict not stated; 2 "
                               "questions\n")
    assert "line 6: Which index does net_prio's root cgroup have?\n" \
           "   (a) 0\n → (b) 1\n   (c) 2\n   why: the root's css id " \
           "is 1\n" in r.stdout
    j = json.loads(_dcblab(["lab", "--teacher", "-j", str(PREDICT)]).stdout)
    assert [(q["line"], q["answer"]) for q in j["questions"]] == \
        [(6, "b"), (15, "b")]
    assert j["questions"][1]["choices"] == {"a": "yes", "b": "no"}
    for lab in LABS:      # every lab's answers, for the README's table
        r = _dcblab(["lab", "--teacher", str(lab)])
        assert r.returncode == 0 and r.stdout.count("\n → (") == len([
            q for q in labdoc.predictions(parse(lab.read_text(), lab))
            if not q.planted]), lab.name


def test_predict_letters_are_checked_before_a_lab_is_needed():
    r = _dcblab(["lab", "--name", "no-such-lab", "--predict", "b",
                 str(PREDICT)])
    assert r.returncode == 2 and r.stderr == (
        f"dcblab: lab: {PREDICT} asks 2 questions, and --predict gives 1 "
        "letter\n")
    r = _dcblab(["lab", "--name", "no-such-lab", "--predict", "bz",
                 str(PREDICT)])
    assert r.returncode == 2 and r.stderr == (
        "dcblab: lab: --predict: question 2 (line 15) has choices a, b, "
        "not z\n")


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


def test_cli_asks_each_question_and_scores_it_after_the_run(lab):
    # Block 1: a prediction (an invalid letter first), then Enter to run;
    # block 2: no prediction (Enter), then Enter to run.
    r = _dcblab(["lab", "--name", lab.name, str(PREDICT)],
                stdin="z\nb\n\n\n\n")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "<!-- answer" not in out          # not shown before the run
    assert "(z) is not one of a/b/c" in out
    assert "The run shows (b) 1: the root's css id is 1 (you predicted " \
           "(b): right)" in out
    assert "The run shows (b) no: write_priomap() looks the name up and " \
           "returns ENODEV (no prediction)" in out
    assert "Your predictions: 1 of 1 as the run showed (1 questions not " \
           "answered)" in out
    assert out.index("your prediction") < out.index("h1# cat")


def test_cli_json_reports_predictions_against_the_run(lab, tmp_path):
    j = json.loads(_dcblab(["lab", "--name", lab.name, "-j", "--predict",
                            "ab", str(PREDICT)]).stdout)
    assert [(p["prediction"], p["answer"], p["shown"], p["right"])
            for p in j["predictions"]] == [("a", "b", True, False),
                                           ("b", "b", True, True)]
    # A block that does not print what the lab says confirms no answer.
    wrong = tmp_path / "predict-wrong.md"
    wrong.write_text(PREDICT.read_text().replace("\n1\n```", "\n0\n```"))
    r = _dcblab(["lab", "--name", lab.name, "--no-pause", "--predict", "b-",
                 str(wrong)])
    assert r.returncode == 1
    assert "The run did not show what the lab says, so its answer (b) 1 " \
           "is not confirmed here." in r.stdout
    assert "Your predictions: 0 of 1" in r.stdout


# --- the session lab a lab runs on ------------------------------------------

def test_a_lab_runs_on_the_session_lab_of_the_topology_it_names(pytester,
                                                               monkeypatch):
    """A lab's blocks use the session lab of its topology: a dcb-fabric
    lab's the fabric's (never the two-hosts lab), and they run with the
    fabric's tests, after all the others; a topology the suite has no
    session lab of is a one-line error."""
    from dcblab.testing.labs_pytest import session_lab
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest(
        "def pytest_collection_finish(session):\n"
        "    for item in session.items:\n"
        "        names = item._fixtureinfo.names_closure\n"
        "        print('USES', item.path.name, 'fabric' in names,\n"
        "              'lab' in names)\n")
    pytester.makepyfile(test_f="def test_f(fabric): pass\n")
    r = pytester.runpytest_subprocess(
        "-p", "dcblab.testing.plugin", "-p", "dcblab.testing.labs_pytest",
        "-p", "no:cacheprovider", "--collect-only", "-q", "-s", "test_f.py",
        *map(str, LABS))
    assert r.ret == 0, r.stdout.str()
    uses = [line.split()[1:] for line in r.outlines
            if line.startswith("USES ")]
    fabric = {lab.name for lab in LABS
              if labdoc.topology_of(lab.read_text()) == "dcb-fabric"}
    # A troubleshooting lab has no items here (test_lab_troubleshoot.py).
    run = [lab for lab in LABS if not labdoc.causes(lab.read_text(), lab)]
    want = [[lab.name, "False", "True"] for lab in run
            if lab.name not in fabric for _ in parse(lab.read_text(), lab)]
    want += [["test_f.py", "True", "False"]]
    want += [[lab.name, "True", "False"] for lab in run
             if lab.name in fabric for _ in parse(lab.read_text(), lab)]
    assert uses == want
    assert session_lab("x.md", "# Lab\n") == "lab"
    with pytest.raises(LabDocError, match=re.escape(
            "x.md: written for topology nope, which the suite has no "
            "session lab of (it has two-hosts, dcb-fabric)")):
        session_lab("x.md", "# Lab\n<!-- topology: nope -->\n")
