"""`dcblab lab FILE`: one teaching lab (docs/labs/NN-*.md), step by step,
on a running lab: each command shown, run, its real output shown and
checked against the lab's; a difference is a diff, never a traceback."""

import json
import os
import random
import sys
from pathlib import Path

from ..core.errors import UsageError
from ..testing.labdoc import (LabRun, cause_steps, causes, guest_runner,
                              host_runner, parse_file, predictions,
                              topology_mismatch, verdict)
from .common import lab_name, named, note

__all__ = ["add_parsers"]


def add_parsers(sub):
    p = named(sub.add_parser(
        "lab", help="run a teaching lab (docs/labs/NN-*.md) step by step "
                    "on a running lab: each command, its real output next "
                    "to the lab's, a diff where they differ"))
    p.add_argument("file", metavar="LAB.md",
                   help="a lab of docs/labs/ (docs/labs/README.md lists "
                        "them)")
    p.add_argument("--no-pause", action="store_true",
                   help="do not wait for Enter before each command")
    p.add_argument("-j", "--json", action="store_true",
                   help="no pauses, no text: one JSON object with every "
                        "step's command, output and verdict, and each "
                        "prediction against what the run showed")
    p.add_argument("--predict", metavar="LETTERS",
                   help="the student's answers to the lab's **Predict:** "
                        "questions, one letter each in order (- for none), "
                        "e.g. bca; without it, each question is asked "
                        "before its commands run (not with --no-pause or "
                        "-j)")
    p.add_argument("--teacher", action="store_true",
                   help="print the lab's questions with their answers and "
                        "why (no lab needed; -j: JSON)")
    p.add_argument("--seed", type=int, metavar="N",
                   help="a troubleshooting lab (one with causes): plant "
                        "the cause seed N picks (default: a random seed, "
                        "printed); with --teacher, say which it picks")
    p.set_defaults(func=cmd_lab)


class _Screen:
    """What a student sees: bold commands, green/red verdicts on a
    terminal, plain text otherwise."""

    def __init__(self, out):
        self.out = out
        self.tty = out.isatty() and os.environ.get("TERM") != "dumb"

    def _c(self, code, text):
        return f"\033[{code}m{text}\033[0m" if self.tty else text

    def line(self, text=""):
        print(text, file=self.out, flush=True)

    def prose(self, text):
        # HTML comments are not for the student: an answer (shown after
        # the run), a troubleshooting lab's causes, the plant marker.
        hidden = False
        for ln in text.split("\n"):
            if ln.startswith("<!--"):
                hidden = not ln.rstrip().endswith("-->")
                continue
            if hidden:
                hidden = ln.rstrip() != "-->"
                continue
            self.line(self._c("1", ln) if ln.startswith("#") else ln)

    def command(self, prompt, command):
        first, *rest = command.split("\n")
        self.line(self._c("1", prompt + first))
        for ln in rest:
            self.line(self._c("1", "> " + ln))

    def good(self, text):
        self.line(self._c("32", text))

    def bad(self, text):
        self.line(self._c("31", text))

    def diff(self, text):
        for ln in text.split("\n"):
            colour = "32" if ln.startswith("+") else \
                "31" if ln.startswith("-") else "36" if ln.startswith("@") \
                else None
            self.line(self._c(colour, ln) if colour else ln)


def cmd_lab(args):
    path = Path(args.file)
    if not path.is_file():
        raise UsageError(f"lab: {args.file}: no such file (the labs are "
                         "docs/labs/NN-*.md)")
    blocks = parse_file(path)
    if not blocks:
        raise UsageError(f"lab: {args.file}: no console block with a "
                         "command (HOST# or host$) in it")
    found = causes(path.read_text(), path)
    seed = args.seed if args.seed is not None else \
        random.SystemRandom().randrange(1000000)
    planted = random.Random(seed).choice(found) if found else None
    if args.teacher:
        return _teacher(path, blocks, args.json, found,
                        planted if args.seed is not None else None, seed)
    given = _given(path, blocks, args.predict)
    from ..lab import Lab, reset_baseline   # not at import: -h stays quick
    name = lab_name(args)
    lab = Lab.attach(name)
    # Before anything runs: a lab of another topology may have the same
    # host names and be left half-changed (lab 9 on dcb-fabric was).
    wrong = topology_mismatch(path, path.read_text(), lab.topology.name)
    if wrong:
        raise UsageError(f"lab: {wrong}")
    used = sorted({s.host for b in blocks for s in b.steps} - {"host"})
    missing = [h for h in used if h not in lab.machines]
    if missing:
        raise UsageError(f"lab: {args.file} uses {', '.join(missing)}, not "
                         f"in lab {name} (hosts: {', '.join(lab.machines)}): "
                         "start the topology it names")
    quiet = args.json
    screen = _Screen(sys.stdout)
    pause = not (args.no_pause or args.json)
    log = note if quiet else screen.line
    for h in used:
        reset_baseline(lab.machine(h), lab.topology.host(h),
                       lab.topology.dcbx)
    log(f"lab {path} on lab {name}: {', '.join(used)} reset to the "
        "baseline")
    if planted:
        log(f"lab {path}: one of its {len(found)} causes will be planted "
            f"(seed {seed}: `--seed {seed}` plants the same one again)")

    run = LabRun(lab.machines,
                 guest_runner(lambda host, argv, timeout:
                              lab.machine(host).agent.exec(
                                  argv, timeout=timeout)),
                 host_runner(name))
    results, differ, guesses = [], [], []
    ask = pause and given is None
    steps = _Steps(screen, run, quiet, results, differ)
    for block in blocks:
        plant, fix = cause_steps(block, planted)
        if plant:
            _plant(run, block, planted.letter, plant)
        if not quiet:
            screen.line()
            screen.prose(block.prose)
            screen.line()
        guess = None
        if block.predict:
            guess = given[len(guesses)] if given else \
                _ask(screen, block.predict) if ask else None
        block_ok = True
        if fix:
            if not quiet:
                screen.line(f"The planted cause: ({planted.letter}) "
                            f"{planted.text}. Its fix:")
            block_ok, pause = steps.run(block, fix, pause)
        ran_ok, pause = steps.run(block, block.steps, pause)
        block_ok = block_ok and ran_ok
        if block.predict:
            guesses.append(_judged(block.predict, guess, block_ok, planted))
            if not quiet:
                _show_answer(screen, guesses[-1])
    ok = all(r["ok"] for r in results)
    tail = "\n".join(path.read_text().split("\n")[blocks[-1].end:]).strip()
    if tail and not quiet:
        screen.line()
        screen.prose(tail)
    if quiet:
        print(json.dumps({"file": str(path), "lab": name, "ok": ok,
                          "steps": results, "predictions": guesses,
                          **({"planted": planted.letter, "seed": seed}
                             if planted else {})},
                         indent=1))
        return 0 if ok else 1
    screen.line()
    summary = f"{path}: {len(results)} steps, " + (
        "all as the lab says" if ok else
        f"{len(differ)} not as the lab says (lines "
        f"{', '.join(map(str, differ))})")
    (screen.good if ok else screen.bad)(summary)
    made = [g for g in guesses if g["prediction"]]
    if made:
        right = sum(g["right"] for g in made)
        screen.line(f"Your predictions: {right} of {len(made)} as the run "
                    "showed" + ("" if len(made) == len(guesses) else
                                f" ({len(guesses) - len(made)} questions "
                                "not answered)"))
    screen.line(f"The guests keep what the lab left (a lab's clean-up may "
                f"have undone some of it); `dcblab reset --name {name} "
                f"{' '.join(used)}` puts them back at the baseline.")
    return 0 if ok else 1


def _wait(screen):
    """Wait for Enter; 'q' quits. False once stdin has ended (the rest
    runs without pauses)."""
    prompt = "  [Enter: run it, q: quit] "
    sys.stdout.write(prompt if screen.tty else "")
    sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
        screen.line("(stdin ended: the remaining steps run without pauses)")
        return False
    if line.strip().lower() in ("q", "quit"):
        raise KeyboardInterrupt
    return True


class _Steps:
    """Runs steps as `dcblab lab` shows them: command, output, verdict."""

    def __init__(self, screen, run, quiet, results, differ):
        self.screen, self.run_, self.quiet = screen, run, quiet
        self.results, self.differ = results, differ

    def run(self, block, steps, pause):
        """(all ok, pause) after running STEPS of BLOCK."""
        screen, run, ok = self.screen, self.run_, True
        for step in steps:
            command = run.command(block, step)
            if not self.quiet:
                screen.command(step.prompt, command)
            if pause:
                pause = _wait(screen)
            outcome = run.run(block, step, command)
            ok = ok and outcome.ok
            self.results.append(_as_json(block, step, command, outcome))
            if self.quiet:
                continue
            for ln in outcome.output:
                screen.line(ln)
            if outcome.rc not in (0, None):
                screen.line(f"[{outcome.rc}]")
            if outcome.ok:
                screen.good("  ✓ as the lab says" + "".join(
                    f"; {{{{{k}}}}} = {v}" for k, v in
                    sorted(outcome.captured.items())))
            else:
                self.differ.append(step.line)
                screen.bad(f"  ✗ not what the lab says "
                           f"({run.where(block.path, step.line)}):")
                screen.diff(outcome.diff)
        return ok, pause


def _plant(run, block, letter, steps):
    """Run cause LETTER's plant steps, unseen; one that does not do what
    the lab says is the lab's mistake, not the student's."""
    for step in steps:
        outcome = run.run(block, step, run.command(block, step))
        if not outcome.ok:
            raise UsageError(f"lab: planting cause ({letter}) failed "
                             f"at {run.where(block.path, step.line)}: "
                             f"{outcome.diff or outcome.output}")


def _teacher(path, blocks, as_json, found, planted, seed):
    """The lab's questions and answers, for the one teaching it; for a
    troubleshooting lab its causes, and with --seed the one it plants."""
    asked = predictions(blocks)
    stated = verdict(path.read_text())
    if as_json:
        print(json.dumps({"file": str(path), "verdict": stated,
                          "questions": [
                              {"line": p.line, "question": p.question,
                               "choices": dict(p.choices),
                               "answer": "planted" if p.planted else
                               p.answer, "why": p.why}
                              for p in asked],
                          **({"causes": {c.letter: c.text for c in found}}
                             if found else {}),
                          **({"seed": seed, "planted": planted.letter}
                             if planted else {})}, indent=1))
        return 0
    if planted:
        print(f"seed {seed} plants ({planted.letter}): {planted.text}")
    print(f"{path}: verdict {stated or 'not stated'}; {len(asked)} "
          f"question{'' if len(asked) == 1 else 's'}")
    for p in asked:
        print(f"\nline {p.line}: {p.question}")
        for letter, text in p.choices:
            mark = "?" if p.planted else "→" if letter == p.answer else " "
            print(f" {mark} ({letter}) {text}")
        print("   the answer is the planted cause (--seed N says which)"
              if p.planted else f"   why: {p.why}")
    for c in found:
        print(f"\ncause ({c.letter}), line {c.line}: {c.text}")
        for label, steps in (("plant", c.plant), ("fix", c.fix)):
            for step in steps:
                print(f"   {label}: {step.prompt}{step.command}")
    return 0


def _given(path, blocks, letters):
    """--predict LETTERS as a list (None for '-'), checked against the
    lab's questions; None without --predict."""
    if letters is None:
        return None
    asked = predictions(blocks)
    if len(letters) != len(asked):
        raise UsageError(f"lab: {path} asks {len(asked)} question"
                         f"{'' if len(asked) == 1 else 's'}, and --predict "
                         f"gives {len(letters)} letter"
                         f"{'' if len(letters) == 1 else 's'}")
    out = []
    for n, (letter, p) in enumerate(zip(letters, asked), 1):
        if letter != "-" and not p.choice(letter):
            raise UsageError(f"lab: --predict: question {n} (line "
                             f"{p.line}) has choices "
                             f"{', '.join(c for c, _ in p.choices)}, not "
                             f"{letter}")
        out.append(None if letter == "-" else letter)
    return out


def _ask(screen, p):
    """Ask a Prediction (the prose above has shown it) on the terminal;
    the letter, or None (Enter, or stdin ended)."""
    letters = "/".join(c for c, _ in p.choices)
    while True:
        sys.stdout.write(f"  your prediction [{letters}, Enter: none] ")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            screen.line("")
            return None
        answer = line.strip().lower()
        if not answer:
            return None
        if p.choice(answer):
            return answer
        screen.line(f"  ({answer}) is not one of {letters}")


def _judged(p, guess, shown, planted=None):
    """A prediction against the run: SHOWN is whether the block printed
    what the lab says, which is what makes its answer true. A planted
    question's answer is the planted cause."""
    answer, why = (planted.letter, planted.text) if p.planted else \
        (p.answer, p.why)
    return {"line": p.line, "question": p.question,
            "choices": dict(p.choices), "prediction": guess,
            "answer": answer, "why": why, "shown": shown,
            "right": bool(shown and guess == answer)}


def _show_answer(screen, g):
    answer = f"({g['answer']}) {g['choices'][g['answer']]}"
    if not g["shown"]:
        screen.bad(f"  The run did not show what the lab says, so its "
                   f"answer {answer} is not confirmed here.")
        return
    mine = g["prediction"]
    said = (f"you predicted ({mine}): " +
            ("right" if g["right"] else "not what happened")) if mine \
        else "no prediction"
    (screen.good if g["right"] else screen.line)(
        f"  The run shows {answer}: {g['why']} ({said})")


def _as_json(block, step, command, outcome):
    return {"line": step.line, "host": step.host, "command": command,
            "rc": outcome.rc, "expected_rc": step.rc,
            "output": outcome.output, "ok": outcome.ok,
            **({} if outcome.ok else {"diff": outcome.diff})}
