"""Teaching labs (docs/labs/NN-*.md): their console blocks, parsed, run
and checked.

A lab is markdown a student reads. Each fenced ``console`` block holds
command lines (``h1# CMD`` runs CMD in guest h1, ``host$ CMD`` on the
host) each followed by the output it must print; the conventions are
cram's (``(re)``, ``(glob)``, ``[N]`` for an exit status) plus ``...``
for any run of lines and ``{{name}}`` for a value a ``(re)`` line
captured earlier in the same file. docs/labs/README.md is the student's
description of the format; this module is its one implementation, used
by the suite (through sybil, see labs_pytest) and by `dcblab lab`.
"""

import difflib
import fnmatch
import os
import re
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..core import paths
from ..core.errors import UsageError

__all__ = ["Step", "Block", "LabDocError", "parse", "parse_file", "check",
           "Outcome", "guest_runner", "host_runner", "substitute",
           "STEP_TIMEOUT", "verdict", "LabRun", "failure_text",
           "topology_of", "topology_mismatch", "DEFAULT_TOPOLOGY",
           "Prediction", "predictions", "Cause", "causes", "cause_steps"]

STEP_TIMEOUT = 60.0

_FENCE_OPEN = re.compile(r"^```console\s*$")
_FENCE_CLOSE = re.compile(r"^```\s*$")
_PROMPT = re.compile(r"^(?:(?P<host>[a-z][a-z0-9]*)# |host\$ )(?P<cmd>.*)$")
_RC = re.compile(r"^\[(\d+)\]$")
_CAPTURE = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}")
# bash -c prints its errors as "bash: line 1: ..." where an interactive
# shell prints "bash: ...": the labs show what a student's shell shows.
_BASH_LINE = re.compile(r"^bash: (?:-c: )?line \d+: ")
# "**Verdict**: **true**" or "**Verdict: true**"
_VERDICT = re.compile(r"\*\*Verdict(?:\*\*:?\s*\*\*|:\s*)([a-z ]+)\*\*")


class LabDocError(UsageError):
    """A lab file that does not follow the format (file:line; exit 2)."""


@dataclass(frozen=True)
class Step:
    """One command line and the output it must print."""
    host: str               # "h1", ...; "host" for a host$ line
    command: str
    expected: tuple         # output lines as written (no [N] line)
    rc: int                 # the exit status it must end with
    line: int               # the command's line in the file (1-based)

    @property
    def prompt(self):
        return "host$ " if self.host == "host" else f"{self.host}# "


@dataclass(frozen=True)
class Block:
    """A console block: its steps, its line, and the prose before it."""
    path: Path
    line: int               # the line of the opening fence
    steps: tuple
    prose: str = ""         # the markdown between the former block and this
    end: int = 0            # the line of the closing fence
    predict: object = None  # the Prediction asked before it, if any
    plant: bool = False     # a troubleshooting lab's cause goes in first


@dataclass(frozen=True)
class Prediction:
    """A question the student answers before a block runs: in the prose
    before the block,

        **Predict:** QUESTION
        (a) CHOICE (b) CHOICE ...
        <!-- answer: LETTER: WHY -->

    The answer is a comment, so a student reading the rendered page does
    not see it; `dcblab lab` shows it after the block has run, and the
    block's own expected output is what makes it true (the suite checks
    that)."""
    question: str
    choices: tuple          # ((letter, text), ...)
    answer: str             # the right letter (None: the planted cause's)
    why: str
    line: int               # the **Predict:** line in the file
    planted: bool = False   # `<!-- answer: planted -->`: see Cause

    def choice(self, letter):
        return dict(self.choices).get(letter)


@dataclass(frozen=True)
class Cause:
    """One of a troubleshooting lab's causes: a comment in the lab,

        <!-- cause LETTER: WHAT IT IS
        HOST# command that plants it
        output
        fix:
        HOST# command that fixes it
        output
        -->

    `dcblab lab` plants one cause, chosen by a seed, before the block
    after `<!-- plant -->`; the lab's `**Predict:**` question whose
    answer is `<!-- answer: planted -->` asks which (its choices are the
    causes' letters), and the cause's fix runs right after it. The suite
    runs the lab once per cause (tests/test_lab_troubleshoot.py)."""
    letter: str
    text: str
    plant: tuple            # Steps
    fix: tuple              # Steps
    line: int


@dataclass
class Outcome:
    """What one step printed and whether it matched."""
    step: Step
    rc: object              # int, or None if it did not finish
    output: list            # its lines, normalised
    ok: bool
    diff: str = ""
    captured: dict = field(default_factory=dict)


def verdict(text):
    """The lab's **Verdict** (true / false / changed since), or None."""
    m = _VERDICT.search(text)
    return m.group(1) if m else None


# A lab names the topology it is written for with a line
# `<!-- topology: NAME -->`; without one it is two-hosts (the course's).
DEFAULT_TOPOLOGY = "two-hosts"
_TOPOLOGY = re.compile(r"^<!-- topology: ([\w.-]+) -->$", re.M)


def topology_of(text):
    """The topology name a lab's text is written for."""
    m = _TOPOLOGY.search(text)
    return m.group(1) if m else DEFAULT_TOPOLOGY


def topology_mismatch(path, text, running):
    """None if a lab (its path and text) fits a running lab's topology
    name; else the one-line reason, saying what to start."""
    want = topology_of(text)
    if want == running:
        return None
    return (f"{path} is written for topology {want}, and this lab runs "
            f"{running}: start one with `dcblab up --name NAME {want}` "
            "and pass --name NAME")


def parse_file(path):
    path = Path(path)
    return parse(path.read_text(), path)


def parse(text, path):
    """The console blocks of a lab's text, as Blocks (one per block that
    has at least one command line)."""
    lines = text.split("\n")
    blocks, i, prose_from = [], 0, 0
    while i < len(lines):
        if not _FENCE_OPEN.match(lines[i]):
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and not _FENCE_CLOSE.match(lines[i]):
            body.append((i + 1, lines[i]))
            i += 1
        if i == len(lines):
            raise LabDocError(f"{path}:{start + 1}: console block not "
                              "closed (no ``` line)")
        steps = _steps(path, body)
        if steps:
            blocks.append(Block(Path(path), start + 1, tuple(steps),
                                "\n".join(lines[prose_from:start]).strip(),
                                i + 1,
                                _prediction(path, lines, prose_from, start),
                                "<!-- plant -->" in lines[prose_from:start]))
            prose_from = i + 1
        i += 1
    stray = _PREDICT.search("\n".join(lines[prose_from:]))
    if stray:
        n = prose_from + "\n".join(lines[prose_from:])[:stray.start()]\
            .count("\n") + 1
        raise LabDocError(f"{path}:{n}: a **Predict:** question with no "
                          "console block after it")
    return blocks


_PREDICT = re.compile(r"^\*\*Predict:\*\*", re.M)
_ANSWER = re.compile(r"^<!-- answer: ([a-z])(?::|\s+—)\s+(.+?) -->$")
_PLANTED = "<!-- answer: planted -->"
_CHOICE = re.compile(r"\(([a-z])\)\s+")


def predictions(blocks):
    """The Predictions of a lab's blocks, in order."""
    return [b.predict for b in blocks if b.predict]


def _prediction(path, lines, first, fence):
    """The Prediction in lines[first:fence] (the prose before the block
    whose fence is at index FENCE), or None. One per block; the question,
    then its choices (a), (b), ..., then the answer comment."""
    at = [k for k in range(first, fence) if _PREDICT.match(lines[k])]
    answers = [k for k in range(first, fence)
               if lines[k].startswith("<!-- answer")]
    if not at:
        if answers:
            raise LabDocError(f"{path}:{answers[0] + 1}: an answer with no "
                              "**Predict:** question before it")
        return None
    k = at[0]
    if len(at) > 1:
        raise LabDocError(f"{path}:{at[1] + 1}: a second **Predict:** "
                          "before the same console block (one per block)")
    after = [a for a in answers if a > k]
    if not after:
        raise LabDocError(f"{path}:{k + 1}: **Predict:** with no "
                          "`<!-- answer: LETTER: WHY -->` line after it")
    m = _ANSWER.match(lines[after[0]])
    planted = lines[after[0]] == _PLANTED
    if not m and not planted:
        raise LabDocError(f"{path}:{after[0] + 1}: the answer line is "
                          "`<!-- answer: LETTER: WHY -->`")
    text = " ".join(ln.strip() for ln in lines[k:after[0]])
    text = text[len("**Predict:**"):].strip()
    parts = _CHOICE.split(text)
    question, rest = parts[0].strip(), parts[1:]
    choices = tuple((rest[i], rest[i + 1].strip())
                    for i in range(0, len(rest), 2))
    letters = [c for c, _ in choices]
    if len(choices) < 2 or letters != [chr(ord("a") + i)
                                       for i in range(len(choices))]:
        raise LabDocError(f"{path}:{k + 1}: a **Predict:** question has "
                          "choices (a), (b), ... in order, two at least")
    if not question or any(not t for _, t in choices):
        raise LabDocError(f"{path}:{k + 1}: a **Predict:** question and "
                          "each of its choices need text")
    if planted:
        return Prediction(question, choices, None, "", k + 1, True)
    if m.group(1) not in letters:
        raise LabDocError(f"{path}:{after[0] + 1}: the answer "
                          f"({m.group(1)}) is not one of the choices "
                          f"({', '.join(letters)})")
    return Prediction(question, choices, m.group(1), m.group(2).strip(),
                      k + 1)


_CAUSE = re.compile(r"^<!-- cause ([a-z]): (.+)$")


def cause_steps(block, cause):
    """Where a planted cause's steps go: (the plant's, run before the
    block marked `<!-- plant -->`; the fix's, run before the steps of the
    block whose question the planted cause answers), each () for any
    other block or without a cause."""
    if cause is None:
        return (), ()
    return (cause.plant if block.plant else (),
            cause.fix if block.predict and block.predict.planted else ())


def causes(text, path):
    """A troubleshooting lab's Causes, in letter order ([] for a lab
    without); checked against its blocks: one plant marker, one question
    answered by the planted cause, whose choices are the causes."""
    lines = text.split("\n")
    found = []
    for k, line in enumerate(lines):
        m = _CAUSE.match(line)
        if not m:
            continue
        end = next((j for j in range(k + 1, len(lines))
                    if lines[j] == "-->"), None)
        if end is None:
            raise LabDocError(f"{path}:{k + 1}: a cause's comment ends "
                              "with a line `-->`")
        body = [(j + 1, lines[j]) for j in range(k + 1, end)]
        cut = [i for i, (_, ln) in enumerate(body) if ln == "fix:"]
        if len(cut) != 1:
            raise LabDocError(f"{path}:{k + 1}: a cause has one `fix:` "
                              "line between its plant and its fix")
        plant = _steps(path, body[:cut[0]])
        fix = _steps(path, body[cut[0] + 1:])
        if not plant or not fix:
            raise LabDocError(f"{path}:{k + 1}: a cause needs commands to "
                              "plant it and to fix it")
        found.append(Cause(m.group(1), m.group(2).strip(), tuple(plant),
                           tuple(fix), k + 1))
    blocks = parse(text, path)
    asked = [p for p in predictions(blocks) if p.planted]
    marked = [b for b in blocks if b.plant]
    if not found:
        if asked or marked:
            raise LabDocError(f"{path}:{(asked or marked)[0].line}: "
                              "planted, but the lab has no "
                              "`<!-- cause X: ...` comment")
        return []
    letters = [c.letter for c in found]
    if letters != sorted(letters) or len(set(letters)) != len(letters):
        raise LabDocError(f"{path}:{found[0].line}: causes go in letter "
                          "order, each letter once")
    if len(asked) != 1 or len(marked) != 1:
        raise LabDocError(f"{path}:{found[0].line}: a lab with causes has "
                          "one `<!-- plant -->` and one question answered "
                          "`<!-- answer: planted -->`")
    offered = [c for c, _ in asked[0].choices]
    if offered != letters:
        raise LabDocError(f"{path}:{asked[0].line}: the planted question's "
                          f"choices ({', '.join(offered)}) are the causes' "
                          f"letters ({', '.join(letters)})")
    if marked[0].line > next(b.line for b in blocks
                             if b.predict is asked[0]):
        raise LabDocError(f"{path}:{marked[0].line}: the cause is planted "
                          "before the question about it")
    return found


def _steps(path, body):
    steps, cur = [], None
    for n, raw in body:
        m = _PROMPT.match(raw)
        if m:
            if cur:
                steps.append(_step(path, cur))
            cur = {"host": m.group("host") or "host", "cmd": m.group("cmd"),
                   "line": n, "out": [], "cont": m.group("cmd").endswith("\\")}
            continue
        if cur is None:
            if raw.strip():
                raise LabDocError(f"{path}:{n}: output before any command "
                                  "line (HOST# or host$)")
            continue
        if cur["cont"]:
            if not raw.startswith("> "):
                raise LabDocError(f"{path}:{n}: a command line ending in \\ "
                                  "continues on a line starting with \"> \"")
            cur["cmd"] += "\n" + raw[2:]
            cur["cont"] = raw.endswith("\\")
            continue
        cur["out"].append((n, raw.rstrip()))
    if cur:
        steps.append(_step(path, cur))
    return steps


def _step(path, cur):
    if cur["cont"]:
        raise LabDocError(f"{path}:{cur['line']}: the command's last line "
                          "ends in \\")
    out = list(cur["out"])          # (line number, text)
    while out and not out[-1][1]:
        out.pop()
    rc = 0
    if out and _RC.match(out[-1][1]):
        rc = int(_RC.match(out.pop()[1]).group(1))
    for n, line in out:
        if line.endswith(" (re)"):
            try:
                re.compile(line[:-5])
            except re.error as e:
                raise LabDocError(f"{path}:{n}: bad (re) line: {e}") \
                    from None
    return Step(cur["host"], cur["cmd"], tuple(t for _, t in out), rc,
                cur["line"])


# --- matching -------------------------------------------------------------

def substitute(text, captures, where):
    """{{name}} replaced by its captured value; an unknown name is the
    lab's mistake (LabDocError naming WHERE)."""
    def one(m):
        if m.group(1) not in captures:
            known = ", ".join(sorted(captures)) or "none yet"
            raise LabDocError(f"{where}: {{{{{m.group(1)}}}}} was not "
                              f"captured by an earlier (re) line "
                              f"(captured: {known})")
        return captures[m.group(1)]
    return _CAPTURE.sub(one, text)


def _line_matches(pattern, actual, captures, where):
    """None if PATTERN (one expected line) does not match ACTUAL, else
    the values it captured."""
    if pattern.endswith(" (re)"):
        rx = _CAPTURE.sub(lambda m: re.escape(substitute(m.group(0),
                                                         captures, where)),
                          pattern[:-5])
        m = re.fullmatch(rx, actual)
        return None if m is None else \
            {k: v for k, v in m.groupdict().items() if v is not None}
    if pattern.endswith(" (glob)"):
        glob = substitute(pattern[:-7], captures, where)
        rx = fnmatch.translate(glob.replace("[", "[[]"))
        return {} if re.match(rx, actual, re.S) else None
    return {} if substitute(pattern, captures, where) == actual else None


def _match(expected, actual, captures, where):
    """Captures if the expected lines match all of ACTUAL (``...`` for
    any run of lines), else None. Backtracks: labs are short."""
    def go(i, j, got):
        if i == len(expected):
            return got if j == len(actual) else None
        if expected[i] == "...":
            for k in range(j, len(actual) + 1):
                r = go(i + 1, k, got)
                if r is not None:
                    return r
            return None
        if j == len(actual):
            return None
        c = _line_matches(expected[i], actual[j], {**captures, **got}, where)
        return None if c is None else go(i + 1, j + 1, {**got, **c})
    return go(0, 0, {})


def _diff(step, expected, actual, captures, where, rc):
    """A unified diff of the expected lines against what was printed.
    Pattern lines that match their counterpart show as that line, and a
    ``...`` as the lines it stands for (up to the next line that
    matches), so only real differences are marked."""
    shown, j = [], 0
    for k, pattern in enumerate(expected):
        if pattern == "...":
            nxt = next((p for p in expected[k + 1:] if p != "..."), None)
            end = j
            while end < len(actual) and (nxt is None or _line_matches(
                    nxt, actual[end], captures, where) is None):
                end += 1
            if nxt is not None and end == len(actual):
                shown.append(pattern)    # nothing after it matched
                continue
            shown.extend(actual[j:end])
            j = end
            continue
        if j < len(actual) and _line_matches(pattern, actual[j], captures,
                                             where) is not None:
            shown.append(actual[j])
        else:
            shown.append(pattern)
        j += 1
    want_rc = [f"[{step.rc}]"] if step.rc else []
    got_rc = [f"[{rc}]"] if rc else []
    return "\n".join(difflib.unified_diff(
        shown + want_rc, actual + got_rc, f"{where} (expected)",
        f"{step.host} printed", lineterm="", n=3))


def check(step, rc, output, captures, where):
    """The Outcome of STEP that exited RC having printed OUTPUT (text)."""
    lines = [_BASH_LINE.sub("bash: ", ln.rstrip())
             for ln in output.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    got = _match(list(step.expected), lines, captures, where) \
        if rc == step.rc else None
    if got is not None:
        return Outcome(step, rc, lines, True, captured=got)
    diff = _diff(step, list(step.expected), lines, captures, where, rc)
    if not diff:   # same lines, other exit status, shown by the [N] lines
        diff = f"exit status {rc}, the lab expects {step.rc}"
    return Outcome(step, rc, lines, False, diff)


# --- running --------------------------------------------------------------

def guest_runner(run):
    """A step runner for guests: RUN(host, argv, timeout) returns an
    object with rc and stdout (an agent Result). The command runs in
    bash -c, stderr merged into stdout in order, cwd /; busybox's timeout
    kills it after TIMEOUT s (rc None)."""
    def runner(host, command, timeout=STEP_TIMEOUT):
        argv = ["/bin/busybox", "timeout", "-s", "KILL", str(int(timeout)),
                "bash", "-c", f"exec 2>&1; {command}"]
        try:
            res = run(host, argv, timeout + 15)
        except TimeoutError:
            return None, f"(no answer from {host} after {timeout:.0f} s)"
        out = (res.stdout or "") + (res.stderr or "")
        if res.rc == 128 + 9:
            return None, out + f"\n(killed after {timeout:.0f} s)"
        return res.rc, out
    return runner


def host_runner(lab_name):
    """A step runner for host$ lines: bash in the repository, bin/ first
    on PATH, DCBLAB_LAB naming the lab; killed with its process group
    after TIMEOUT s (rc None)."""
    env = dict(os.environ, DCBLAB_LAB=lab_name,
               PATH=f"{paths.ROOT / 'bin'}:{os.environ.get('PATH', '')}")

    def runner(command, timeout=STEP_TIMEOUT):
        p = subprocess.Popen(["bash", "-c", f"exec 2>&1; {command}"],
                             cwd=paths.ROOT, env=env, text=True,
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            return None, out + f"\n(killed after {timeout:.0f} s)"
        return p.returncode, out
    return runner


class LabRun:
    """One lab file's run on a lab: its steps in order, the values its
    (re) lines captured, each step's Outcome. GUEST(host, command) and
    HOST(command) are step runners (guest_runner, host_runner)."""

    def __init__(self, hosts, guest, host):
        self.hosts = tuple(hosts)
        self.guest = guest
        self.host = host
        self.captures = {}

    def where(self, path, line):
        return f"{_shown(path)}:{line}"

    def command(self, block, step):
        """The step's command with its {{captures}} filled in."""
        return substitute(step.command, self.captures,
                          self.where(block.path, step.line))

    def run(self, block, step, command):
        """Run STEP as COMMAND (self.command(block, step), which the
        caller has already shown or recorded)."""
        where = self.where(block.path, step.line)
        if step.host == "host":
            rc, out = self.host(command)
        elif step.host not in self.hosts:
            raise LabDocError(f"{where}: no host {step.host} in this lab "
                              f"(hosts: {', '.join(self.hosts)})")
        else:
            rc, out = self.guest(step.host, command)
        o = check(step, rc, out, self.captures, where)
        if o.ok:
            self.captures.update(o.captured)
        return o


def _shown(path):
    """PATH relative to the repository if it is in it."""
    try:
        return str(Path(path).resolve().relative_to(paths.ROOT))
    except ValueError:
        return str(path)


def failure_text(block, step, outcome, command):
    """A failed step as the suite and `dcblab lab` show it: file:line, the
    command, the diff."""
    where = f"{_shown(block.path)}:{step.line}"
    return f"{where}: {step.prompt}{command}\n{outcome.diff}"
