"""Build glue: linux-source-6.1 + kernel-patches/ -> bzImage.

``python3 -m dcblab.build kernel`` runs four steps, each timed:

extract  /usr/src/linux-source-6.1.tar.xz -> BUILD/linux-source-6.1, once
         (unpacked beside its final place and renamed, so an interrupted
         extract leaves nothing half-done behind).
patch    kernel-patches/series with quilt.  Patches already applied and
         unchanged stay applied; from the first changed one on, patches are
         popped and pushed again, and files whose content came out the same
         get their old mtime back, so make rebuilds only what changed.
config   tinyconfig + kernel-patches/lab.config (merge_config.sh), then a
         check that every option in lab.config came out as requested.
build    bzImage with LOCALVERSION=-dcblab, objects in BUILD/kernel-obj.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import paths

__all__ = ["main", "BuildError", "ConfigMismatch", "apply_patches",
           "parse_fragment", "check_config", "failed_hunks"]

_FRAGMENT = paths.PATCH_DIR / "lab.config"
_CONFIG_LINE = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(\S+)")
_UNSET_LINE = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set")


class BuildError(Exception):
    """A build step failed; the message says which and what to do."""


class ConfigMismatch(BuildError):
    pass


def _say(msg):
    print(f"dcblab: {msg}", flush=True)


class _Step:
    """Prints a step's start and, on success, its duration."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.t0 = time.monotonic()
        _say(f"{self.name} ...")
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            _say(f"{self.name} done in {time.monotonic() - self.t0:.1f}s")
        return False


def _sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _tarball_id():
    st = paths.KERNEL_TARBALL.stat()
    return f"{st.st_size}:{int(st.st_mtime)}"


# --- extract ---------------------------------------------------------------

def extract():
    src = paths.kernel_src()
    stamp = paths.build_dir() / ".extracted"
    if not paths.KERNEL_TARBALL.exists():
        raise BuildError(f"{paths.KERNEL_TARBALL} is missing: run `make deps` "
                         "(Debian package linux-source-6.1)")
    if src.is_dir() and stamp.exists() and stamp.read_text() == _tarball_id():
        _say(f"extract: {src} is up to date")
        return
    paths.build_dir().mkdir(parents=True, exist_ok=True)
    tmp = paths.build_dir() / ".extract.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(paths.kernel_obj(), ignore_errors=True)
    (paths.build_dir() / ".applied.json").unlink(missing_ok=True)
    tmp.mkdir()
    subprocess.run(["tar", "-xf", str(paths.KERNEL_TARBALL), "-C", str(tmp)],
                   check=True)
    (tmp / "linux-source-6.1").rename(src)
    tmp.rmdir()
    stamp.write_text(_tarball_id())


# --- patch -----------------------------------------------------------------

def _series(patch_dir=None):
    patch_dir = patch_dir or paths.PATCH_DIR
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
    want = [(n, _sha(patch_dir / n)) for n in _series(patch_dir)]
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
        _say(f"patch: {len(want)} patch(es) already applied")
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
            before[f] = (_sha(fp), st.st_atime_ns, st.st_mtime_ns)

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
                text = (patch_dir / name).read_text(errors="replace")
                lines = [f"patch {name} does not apply to "
                         f"linux-source-6.1 ({len(done)} of {len(want)} "
                         "applied before it)"]
                for f, n, hunk in failed_hunks(text, r.stdout + r.stderr):
                    lines.append(f"--- {f}: hunk #{n} FAILED ---")
                    lines.append(hunk)
                if len(lines) == 1:
                    lines.append((r.stdout + r.stderr).strip())
                lines.append(f"fix {patch_dir / name} and run `make kernel` "
                             "again: applied patches stay, the rest resume")
                raise BuildError("\n".join(lines))
            done.append([name, digest])
            record.write_text(json.dumps(done))
            _say(f"patch: applied {name}")
    finally:
        for f, (digest, atime, mtime) in before.items():
            fp = src / f
            if fp.is_file() and _sha(fp) == digest:
                os.utime(fp, ns=(atime, mtime))


# --- config ----------------------------------------------------------------

def parse_fragment(text, origin="lab.config"):
    """{CONFIG_X: value or None for 'is not set'} from a fragment.

    Trailing ``# comments`` after a value are ours, not Kconfig's, and are
    dropped here.
    """
    opts = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = _UNSET_LINE.match(line)
        if m:
            opts[m.group(1)] = None
            continue
        if not line or line.startswith("#"):
            continue
        m = _CONFIG_LINE.match(line)
        if not m:
            raise BuildError(f"{origin}:{lineno}: not a Kconfig line: {raw!r}")
        if m.group(1) in opts:
            raise BuildError(f"{origin}:{lineno}: {m.group(1)} set twice")
        opts[m.group(1)] = m.group(2)
    return opts


def check_config(wanted, config_text):
    """Names of options whose value in .config differs from the request."""
    have = {}
    for line in config_text.splitlines():
        m = _CONFIG_LINE.match(line)
        if m:
            have[m.group(1)] = m.group(2)
    bad = []
    for name, value in wanted.items():
        got = have.get(name)
        if got != value:
            bad.append(f"{name}: asked {value or 'not set'}, "
                       f"got {got or 'not set'}")
    return bad


def _make_argv(args):
    return ["make", "-C", str(paths.kernel_src()), f"O={paths.kernel_obj()}",
            "LOCALVERSION=-dcblab", *args]


def _make(args):
    argv = _make_argv(args)
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError(f"{' '.join(argv)} failed:\n{r.stdout[-3000:]}"
                         f"{r.stderr[-3000:]}")


def configure():
    obj = paths.kernel_obj()
    wanted = parse_fragment(_FRAGMENT.read_text(), str(_FRAGMENT))
    stamp = paths.build_dir() / ".config-inputs"
    inputs = f"{_tarball_id()} {_sha(_FRAGMENT)}"
    config = obj / ".config"
    if config.exists() and stamp.exists() and stamp.read_text() == inputs:
        _say("config: up to date")
    else:
        obj.mkdir(parents=True, exist_ok=True)
        clean = paths.build_dir() / "lab.config.clean"
        clean.write_text("".join(
            f"{k}={v}\n" if v is not None else f"# {k} is not set\n"
            for k, v in wanted.items()))
        _make(["tinyconfig"])
        r = subprocess.run(
            [str(paths.kernel_src() / "scripts/kconfig/merge_config.sh"),
             "-m", "-O", str(obj), str(config), str(clean)],
            capture_output=True, text=True, cwd=obj)
        if r.returncode != 0:
            raise BuildError(f"merge_config.sh failed:\n{r.stdout}{r.stderr}")
        _make(["olddefconfig"])
        stamp.write_text(inputs)
    bad = check_config(wanted, config.read_text())
    if bad:
        stamp.unlink(missing_ok=True)
        raise ConfigMismatch(
            f"{_FRAGMENT}: Kconfig did not keep {len(bad)} option(s) "
            "(missing dependency or renamed symbol?):\n  " + "\n  ".join(bad))
    _say(f"config: all {len(wanted)} options of lab.config as requested")


# --- build -----------------------------------------------------------------

def build_kernel():
    log = paths.build_dir() / "kernel-build.log"
    argv = _make_argv([f"-j{os.cpu_count() or 1}", "bzImage"])
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        last = t0
        while proc.poll() is None:
            time.sleep(0.5)
            now = time.monotonic()
            if now - last >= 15:
                last = now
                n = sum(1 for line in open(log, errors="replace")
                        if line.lstrip().startswith(("CC ", "AS ", "LD ")))
                _say(f"build: {n} objects so far, {now - t0:.0f}s")
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-40:]
        raise BuildError(f"kernel build failed (full log: {log}):\n"
                         + "\n".join(tail))
    _say(f"build: {paths.bzimage()} "
         f"({paths.bzimage().stat().st_size // 1024} KiB)")


def checkpatch():
    """checkpatch.pl --strict on every patch of the series; 0 on clean."""
    script = paths.kernel_src() / "scripts/checkpatch.pl"
    if not script.exists():
        raise BuildError(f"{script} is missing: run `make kernel` first")
    env = dict(os.environ, PATH="/usr/bin:/bin:" + os.environ.get("PATH", ""))
    bad = 0
    for name in _series():
        # Run from the extracted tree (no .git): checkpatch then skips its
        # git-only SPDX lookup and uses the tree for everything else.
        r = subprocess.run([str(script), "--strict", "--color=never",
                            str(paths.PATCH_DIR / name)],
                           cwd=paths.kernel_src(), env=env,
                           capture_output=True, text=True)
        summary = [ln for ln in r.stdout.splitlines()
                   if ln.startswith("total:")]
        clean = r.returncode == 0 and summary and \
            summary[0].startswith("total: 0 errors, 0 warnings, 0 checks")
        print(f"{name}: {summary[0] if summary else 'no summary'}")
        if not clean:
            bad += 1
            print(r.stdout + r.stderr)
    return 1 if bad else 0


def check_series():
    """git apply --check of the series, in order, on a fresh extract.

    Only the files the series touches are extracted (into a temporary
    directory), so this checks the patches against pristine
    linux-source-6.1 independently of the quilt-managed build tree.
    """
    names = _series()
    texts = [(n, (paths.PATCH_DIR / n).read_text(errors="replace"))
             for n in names]
    files = sorted(set().union(*(_patch_files(t) for _, t in texts)))
    with tempfile.TemporaryDirectory(prefix="dcblab-series-") as tmp:
        members = [f"linux-source-6.1/{f}" for f in files]
        # Files a patch creates are not in the tarball: tar must not fail.
        subprocess.run(["tar", "-xf", str(paths.KERNEL_TARBALL), "-C", tmp,
                        "--ignore-failed-read", *members],
                       capture_output=True)
        tree = Path(tmp) / "linux-source-6.1"
        tree.mkdir(exist_ok=True)
        for name, _ in texts:
            patch = str(paths.PATCH_DIR / name)
            r = subprocess.run(["git", "apply", "--check", patch], cwd=tree,
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise BuildError(f"git apply --check {name} on a fresh "
                                 f"linux-source-6.1 failed:\n{r.stderr}")
            subprocess.run(["git", "apply", patch], cwd=tree, check=True)
            print(f"{name}: git apply --check ok")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m dcblab.build",
                                 description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("what", choices=["kernel", "patch", "checkpatch",
                                     "check-series"])
    args = ap.parse_args(argv)
    try:
        if args.what == "checkpatch":
            return checkpatch()
        if args.what == "check-series":
            return check_series()
        t0 = time.monotonic()
        with _Step("extract"):
            extract()
        with _Step("patch"):
            apply_patches()
        if args.what == "patch":
            return 0
        with _Step("config"):
            configure()
        with _Step("build"):
            build_kernel()
        _say(f"kernel ready in {time.monotonic() - t0:.1f}s: {paths.bzimage()}")
        return 0
    except BuildError as e:
        print(f"dcblab: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
