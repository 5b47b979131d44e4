"""kernel-patches/series: reading it, applying it with quilt, checking it.

``apply_patches`` keeps patches that are already applied and unchanged;
from the first changed one on, patches are popped and pushed again, and
files whose content came out the same get their old mtime back, so make
rebuilds only what changed (in every flavour's object directory: the
patched source tree is shared).

``check_series`` runs only when the series, linux-source-6.1 or git
changed since its last clean run (stamps.py).
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from dcblab.core import paths

from .common import BuildError, file_sha256, say, tarball_id
from .stamps import Stamp, check_stamp_path, run_once, tool_version

__all__ = ["read_series", "series_digests", "quilt_files", "apply_patches",
           "failed_hunks", "check_series", "check_applies",
           "check_each_applies", "first_failure"]


def read_series(patch_dir=None):
    """Patch names listed in PATCH_DIR/series, in order; each must exist."""
    patch_dir = Path(patch_dir or paths.PATCH_DIR)
    series = patch_dir / "series"
    names = []
    for line in series.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line.split()[0])
    for name in names:
        if not (patch_dir / name).is_file():
            raise BuildError(f"{series}: patch {name!r} is listed but "
                             f"{patch_dir / name} does not exist")
    return names


def series_digests(patch_dir=None):
    """{file name: sha256} of the series file and of every patch it lists:
    the part of a stamp that says which series a step saw."""
    patch_dir = Path(patch_dir or paths.PATCH_DIR)
    names = ["series", *read_series(patch_dir)]
    return {n: file_sha256(patch_dir / n) for n in names}


def quilt_files(src=None):
    """Files of the tree quilt keeps a backup of: those the applied patches
    touch and those added with ``quilt edit``, sorted."""
    pc = Path(src or paths.kernel_src()) / ".pc"
    files = set()
    if pc.is_dir():
        for top in pc.iterdir():
            if top.is_dir():
                files |= {str(f.relative_to(top)) for f in top.rglob("*")
                          if f.is_file() and f.name != ".timestamp"}
    return sorted(files)


def _patch_files(patch_text):
    files = set()
    for line in patch_text.splitlines():
        m = re.match(r"^(?:---|\+\+\+) [ab]/(\S+)", line)
        if m:
            files.add(m.group(1))
    return files


def failed_hunks(patch_text, quilt_output):
    """The hunks quilt reported as FAILED, as (file, number, hunk text)."""
    failed = []
    current = None
    for line in quilt_output.splitlines():
        m = re.match(r"^patching file (\S+)", line)
        if m:
            current = m.group(1)
        m = re.match(r"^Hunk #(\d+) FAILED", line)
        if m and current:
            failed.append((current, int(m.group(1))))
    hunks = {}
    cur_file, number, buf = None, 0, None
    for line in patch_text.splitlines():
        m = re.match(r"^\+\+\+ b/(\S+)", line)
        if m:
            cur_file, number, buf = m.group(1), 0, None
            continue
        if line.startswith("@@") and cur_file:
            number += 1
            buf = [line]
            hunks[(cur_file, number)] = buf
        elif buf is not None and line[:1] in (" ", "+", "-", "\\"):
            if not line.startswith("--- "):
                buf.append(line)
        else:
            buf = None
    return [(f, n, "\n".join(hunks.get((f, n), ["(hunk not found)"])))
            for f, n in failed]


def _quilt(args, src, patch_dir):
    env = dict(os.environ, QUILT_PATCHES=str(patch_dir),
               QUILT_SERIES=str(patch_dir / "series"), QUILT_PC=".pc")
    env.pop("QUILTRC", None)
    return subprocess.run(["quilt", "--quiltrc", "/dev/null", *args],
                          cwd=src, env=env, capture_output=True, text=True)


def apply_patches(src=None, patch_dir=None, record=None):
    """Bring src to exactly the series in patch_dir (see module doc)."""
    src = Path(src or paths.kernel_src())
    patch_dir = Path(patch_dir or paths.PATCH_DIR)
    record = Path(record or paths.build_dir() / ".applied.json")
    want = [(n, file_sha256(patch_dir / n)) for n in read_series(patch_dir)]
    applied = json.loads(record.read_text()) if record.exists() else []
    pc = src / ".pc" / "applied-patches"
    quilt_applied = pc.read_text().split() if pc.exists() else []
    if [n for n, _ in applied] != quilt_applied:
        # The record and quilt disagree (interrupted run): trust quilt and
        # re-apply everything it has.
        applied = [(n, "?") for n in quilt_applied]
    keep = 0
    while (keep < len(applied) and keep < len(want)
           and list(applied[keep]) == list(want[keep])):
        keep += 1
    if keep == len(applied) == len(want):
        say(f"patch: {len(want)} patch(es) already applied")
        return

    touched = set()
    for name, _ in applied[keep:] + want[keep:]:
        p = patch_dir / name
        if p.exists():
            touched |= _patch_files(p.read_text(errors="replace"))
    before = {}
    for f in touched:
        fp = src / f
        if fp.is_file():
            st = fp.stat()
            before[f] = (file_sha256(fp), st.st_atime_ns, st.st_mtime_ns)

    if len(applied) > keep:
        target = ["-a"] if keep == 0 else [applied[keep - 1][0]]
        r = _quilt(["pop", "-f", "-q", *target], src, patch_dir)
        if r.returncode not in (0, 2):
            raise BuildError(f"quilt pop failed:\n{r.stdout}{r.stderr}")
    done = [list(a) for a in applied[:keep]]
    record.write_text(json.dumps(done))
    try:
        for name, digest in want[keep:]:
            r = _quilt(["push", name], src, patch_dir)
            if r.returncode != 0:
                raise BuildError(_push_failure(name, patch_dir, r, len(done),
                                               len(want)))
            done.append([name, digest])
            record.write_text(json.dumps(done))
            say(f"patch: applied {name}")
    finally:
        for f, (digest, atime, mtime) in before.items():
            fp = src / f
            if fp.is_file() and file_sha256(fp) == digest:
                os.utime(fp, ns=(atime, mtime))


def _push_failure(name, patch_dir, result, n_done, n_want):
    text = (patch_dir / name).read_text(errors="replace")
    lines = [f"patch {name} does not apply to linux-source-6.1 "
             f"({n_done} of {n_want} applied before it)"]
    for f, n, hunk in failed_hunks(text, result.stdout + result.stderr):
        lines.append(f"--- {f}: hunk #{n} FAILED ---")
        lines.append(hunk)
    if len(lines) == 1:
        lines.append((result.stdout + result.stderr).strip())
    lines.append(f"fix {patch_dir / name} and run `make kernel` "
                 "again: applied patches stay, the rest resume")
    return "\n".join(lines)


def first_failure(text):
    """(patch name, where) of the first patch a build's output (an
    apply_patches failure, _push_failure's text) says does not apply,
    where its first failing hunk: "FILE: hunk #N FAILED", or "FILE does
    not exist", or quilt's first line; None if text says none."""
    m = re.search(r"^(?:dcblab: error: )?patch (\S+) does not apply", text,
                  re.M)
    if m is None:
        return None
    rest = text[m.end():]
    hunk = re.search(r"^--- (\S+): hunk #(\d+) FAILED ---$", rest, re.M)
    if hunk:
        return m.group(1), f"{hunk.group(1)}: hunk #{hunk.group(2)} FAILED"
    gone = re.search(r"^\|\+\+\+ b/(\S+)\n(?:.*\n)*?No file to patch",
                     rest, re.M)
    if gone:
        return m.group(1), f"{gone.group(1)} does not exist"
    said = [ln.strip() for ln in rest.splitlines()[1:]
            if ln.strip() and not ln.startswith("Applying patch")]
    return m.group(1), said[0] if said else "quilt gave no reason"


def check_series(force=False):
    """git apply --check of the series, in order, on a fresh extract.

    Only the files the series touches are extracted (into a temporary
    directory), so this checks the patches against pristine
    linux-source-6.1 independently of the quilt-managed build tree.
    Skipped while its stamp holds, unless force.
    """
    stamp = Stamp(check_stamp_path("check-series"),
                  {**series_digests(), "linux-source-6.1": tarball_id(),
                   "git": tool_version(["git", "--version"])})
    return run_once("check-series", stamp, _check_series,
                    "series unchanged since the last clean run", force)


def _check_series():
    check_applies(read_series(),
                  on_ok=lambda name: print(f"{name}: git apply --check ok"))
    return 0


def check_applies(names, on_ok=None):
    """git apply --check of the patches names (of kernel-patches/), in
    order, each applied before the next is checked, on the files they
    touch extracted from linux-source-6.1 into a temporary directory;
    BuildError naming the first that does not apply. on_ok(name) after
    each that does."""
    check_each_applies([names], on_ok)


def check_each_applies(series, on_ok=None):
    """check_applies of each list of patch names in series, each on its
    own copy of the files, extracted once: reading the tarball is most of
    a check's time (~15 s here)."""
    texts = {n: (paths.PATCH_DIR / n).read_text(errors="replace")
             for names in series for n in names}
    files = sorted(set().union(*map(_patch_files, texts.values())))
    with tempfile.TemporaryDirectory(prefix="dcblab-series-") as tmp:
        pristine = Path(tmp) / "pristine"
        pristine.mkdir()
        members = [f"linux-source-6.1/{f}" for f in files]
        # Files a patch creates are not in the tarball: tar must not fail.
        subprocess.run(["tar", "-xf", str(paths.KERNEL_TARBALL), "-C",
                        str(pristine), "--ignore-failed-read", *members],
                       capture_output=True)
        (pristine / "linux-source-6.1").mkdir(exist_ok=True)
        for i, names in enumerate(series):
            tree = Path(tmp) / str(i)
            shutil.copytree(pristine / "linux-source-6.1", tree)
            for name in names:
                patch = str(paths.PATCH_DIR / name)
                r = subprocess.run(["git", "apply", "--check", patch],
                                   cwd=tree, capture_output=True, text=True)
                if r.returncode != 0:
                    raise BuildError(f"git apply --check {name} on a fresh "
                                     f"linux-source-6.1 failed:\n{r.stderr}")
                subprocess.run(["git", "apply", patch], cwd=tree, check=True)
                if on_ok:
                    on_ok(name)
