"""docs/reliability.md's tables of bad input say what really happens.

Every row of a table whose first column is a command (`dcblab ...`, a
guest tool, with `VAR=value` words first) is run here and must exit with
the row's code and print the row's line as the last line of stderr (`…`
in the row: any text). Rows naming `--name two-hosts` run against the
session's lab (its name put in, and taken out of what it prints). The
topology table must list every file of tests/topology/bad/ with the line
that file's header expects (tests/test_topology.py checks the files).
"""

import os
import re
import shlex
import subprocess
import sys

import pytest

from dcblab.core import paths

DOC = paths.ROOT / "docs" / "reliability.md"
BAD = paths.ROOT / "tests" / "topology" / "bad"
TOOLS = ("priosend", "priosink", "cgwrite", "prioping", "cgsockprio",
         "dcbnl-raw", "dcbapp-netprio", "dcblab-run", "cgfuzz")
DOC_LAB = "two-hosts"


def _cell(text):
    """A table cell's code span, unwrapped (`x` or `` x ``), or None."""
    text = text.strip()
    m = re.fullmatch(r"(`+)\s?(.*?)\s?\1", text)
    return m.group(2) if m else None


def _rows(section):
    """(row text, cells) of the tables under the heading SECTION."""
    text = DOC.read_text()
    start = text.index(f"\n### {section}\n")
    end = text.find("\n### ", start + 1)
    body = text[start:end if end != -1 else len(text)]
    rows = []
    for line in body.splitlines():
        if not line.startswith("| ") or set(line) <= set("|- "):
            continue
        cells = [c for c in line.strip().strip("|").split(" | ")]
        if _cell(cells[0]) is not None:
            rows.append((line, cells))
    return rows


COMMAND_SECTIONS = ("`dcblab` arguments", "Environment", "Guest tools")
COMMANDS = [cells for s in COMMAND_SECTIONS for _, cells in _rows(s)]


def _argv(command):
    words = shlex.split(command)
    env = {}
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        k, _, v = words.pop(0).partition("=")
        env[k] = v
    if words[0] == "dcblab":
        argv = [sys.executable, str(paths.ROOT / "bin" / "dcblab"),
                *words[1:]]
    else:
        assert words[0] in TOOLS, f"{command}: not a command the doc runs"
        argv = [str(paths.tools_dir() / words[0]), *words[1:]]
    return argv, env


def _expected(text):
    return re.compile("".join(".*" if part == "…" else re.escape(part)
                              for part in re.split("(…)", text)))


@pytest.mark.parametrize("cells", COMMANDS, ids=[_cell(c[0]) for c in
                                                 COMMANDS])
def test_bad_input_row(cells, request):
    command, code, line = _cell(cells[0]), int(cells[1]), _cell(cells[2])
    name = None
    if f"--name {DOC_LAB}" in command:
        name = request.getfixturevalue("lab").name
        command = command.replace(f"--name {DOC_LAB}", f"--name {name}")
    argv, env = _argv(command)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                       cwd=paths.ROOT, stdin=subprocess.DEVNULL,
                       env={**os.environ, **env})
    err = r.stderr.strip().splitlines()
    last = err[-1] if err else ""
    if name:
        last = last.replace(name, DOC_LAB)
    assert r.returncode == code, r.stderr
    assert _expected(line).fullmatch(last), f"doc: {line}\ngot: {last}"


def test_topology_table_lists_every_bad_file_with_its_line():
    doc = {_cell(cells[0]): _cell(cells[1])
           for _, cells in _rows("Topology keys")}
    files = {f.name: f.read_bytes().split(b"\n", 1)[0].decode()
             .removeprefix("# expect: ") for f in BAD.glob("*.toml")}
    assert doc == files


def test_every_row_is_run():
    """A row this test cannot run (not a code span, a section renamed)
    would silently check nothing."""
    assert len(COMMANDS) >= 40
    assert all(_cell(c[2]) is not None and c[1].strip().isdigit()
               for c in COMMANDS)
