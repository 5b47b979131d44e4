"""Checks of the inputs and outputs: config fragments against the .config
Kconfig produced, and checkpatch.pl on the series (run only when the
series, checkpatch.pl or its options changed since its last clean run:
stamps.py)."""

import os
import re
import subprocess
from pathlib import Path

from dcblab.core import paths

from .common import BuildError, file_sha256, tarball_id
from .series import read_series, series_digests
from .stamps import Stamp, check_stamp_path, run_once

__all__ = ["parse_fragment", "merge_fragments", "check_config",
           "dropped_options", "checkpatch"]

_CONFIG_LINE = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(\S+)")
_UNSET_LINE = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set")
_CHECKPATCH_OPTIONS = ("--strict", "--color=never")


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


def merge_fragments(fragments):
    """{CONFIG_X: (value, fragment)} over fragment files, in order.

    An option a later fragment sets again overrides the earlier value and
    is then that fragment's: a dropped option names the file that asked.
    """
    merged = {}
    for frag in map(Path, fragments):
        if not frag.is_file():
            raise BuildError(f"{frag}: config fragment does not exist")
        for name, value in parse_fragment(frag.read_text(), str(frag)).items():
            merged.pop(name, None)
            merged[name] = (value, frag)
    return merged


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


def dropped_options(merged, config_text):
    """[(fragment, check_config lines)] for each fragment that lost options.

    merged is what merge_fragments returns; fragments come in the order
    their first option appears.
    """
    by_fragment = {}
    for name, (value, frag) in merged.items():
        by_fragment.setdefault(frag, {})[name] = value
    out = []
    for frag, wanted in by_fragment.items():
        bad = check_config(wanted, config_text)
        if bad:
            out.append((frag, bad))
    return out


def checkpatch(force=False):
    """checkpatch.pl --strict on every patch of the series; 0 on clean.

    Skipped while its stamp holds, unless force.
    """
    script = paths.kernel_src() / "scripts/checkpatch.pl"
    if not script.exists():
        raise BuildError(f"{script} is missing: run `make kernel` first")
    # checkpatch.pl reads its word lists from the tree; the tarball's id
    # stands for them and for the rest of the tree it looks at.
    stamp = Stamp(check_stamp_path("checkpatch"),
                  {**series_digests(), "checkpatch.pl": file_sha256(script),
                   "options": " ".join(_CHECKPATCH_OPTIONS),
                   "linux-source-6.1": tarball_id()})
    return run_once("checkpatch", stamp, lambda: _checkpatch(script),
                    "series unchanged since the last clean run", force)


def _checkpatch(script):
    env = dict(os.environ, PATH="/usr/bin:/bin:" + os.environ.get("PATH", ""))
    bad = 0
    for name in read_series():
        # Run from the extracted tree (no .git): checkpatch then skips its
        # git-only SPDX lookup and uses the tree for everything else.
        r = subprocess.run([str(script), *_CHECKPATCH_OPTIONS,
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
