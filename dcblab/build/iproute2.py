"""The guests' ``dcb``: Debian's iproute2 source + iproute2-patches/.

iproute2 6.1.0's ``dcb`` (Debian 12) sends every request with NLM_F_ACK
and stops reading at the kernel's reply, which leaves the ACK behind in
its socket; a set first reads the device's current state with a GET, so
the set then takes the GET's ACK for its own answer: exit 0 although the
driver refused (same second: the sequence numbers, ``time(NULL)``, are
equal), or "Attribute write: Protocol error" (the second ticked in
between). Upstream fixed it in 6.2 (commit d0e02f35); Debian 12 has not.
The guests type ``dcb``, so they get one built here from the source of
the iproute2 the host has installed (the version of the image's ``ip`` and
``tc``), with our fix (iproute2-patches/, applied with ``patch -p1`` in
series order, file name order).

``python3 -m dcblab.build dcb`` runs:

fetch    ``apt-get source --download-only iproute2=VERSION`` with apt's
         state, lists and cache under BUILD/iproute2/apt (deb-src entries
         made from the host's own ``deb`` entries, same mirrors and keys);
         nothing of the host's apt state is read or written but its
         sources and keyrings.  Once per version.
unpack   ``dpkg-source -x`` (Debian's own patches applied), then ours.
build    ``./configure``, ``make SUBDIRS="lib dcb"``: BUILD/iproute2/dcb.

The whole runs only when the version or a patch changed (a stamp beside
the binary holds their digests).
"""

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from dcblab.core import paths

from .common import BuildError, Step, say

__all__ = ["build_dcb", "dcb_binary", "deb_src_entries", "patch_files"]

PACKAGE = "iproute2"


def _work():
    return paths.build_dir() / "iproute2"


def dcb_binary():
    """Where the guests' dcb is built."""
    return _work() / "dcb"


def patch_files():
    """iproute2-patches/*.patch in the order they apply."""
    return sorted((paths.ROOT / "iproute2-patches").glob("*.patch"))


def _installed_version():
    res = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", PACKAGE],
                         capture_output=True, text=True)
    if res.returncode != 0 or not res.stdout:
        raise BuildError(f"{PACKAGE} is not installed: run 'make deps'")
    return res.stdout


def deb_src_entries(texts):
    """deb-src entries, one-line format, for the ``deb`` entries of apt
    source files: ``texts`` is [(file name, content)], one-line
    (``.list``) or deb822 (``.sources``) format. Options ([signed-by=...],
    Signed-By:) are kept; disabled deb822 stanzas (Enabled: no) dropped."""
    out = []
    for name, text in texts:
        if name.endswith(".sources"):
            for stanza in text.split("\n\n"):
                fields = {}
                key = None
                for line in stanza.splitlines():
                    if line.startswith("#") or not line.strip():
                        continue
                    if line[0] in " \t" and key:
                        fields[key] += " " + line.strip()
                        continue
                    key, _, value = line.partition(":")
                    key = key.strip().lower()
                    fields[key] = value.strip()
                if "deb" not in fields.get("types", "").split() or \
                        fields.get("enabled", "yes").lower() == "no":
                    continue
                opt = ""
                if fields.get("signed-by"):
                    opt = f"[signed-by={fields['signed-by']}] "
                for uri in fields.get("uris", "").split():
                    for suite in fields.get("suites", "").split():
                        out.append(f"deb-src {opt}{uri} {suite} "
                                   f"{fields.get('components', '')}".rstrip())
        else:
            for line in text.splitlines():
                words = line.split("#", 1)[0].split()
                if words and words[0] == "deb":
                    out.append(" ".join(["deb-src"] + words[1:]))
    return out


def _host_sources():
    etc = Path("/etc/apt")
    files = [etc / "sources.list"] + \
        sorted((etc / "sources.list.d").glob("*.list")) + \
        sorted((etc / "sources.list.d").glob("*.sources"))
    return [(f.name, f.read_text()) for f in files if f.is_file()]


def _apt(apt_dir, *args, cwd=None):
    """apt-get with its state, lists and cache under apt_dir."""
    opts = ["-o", "Dir::Etc::SourceList=" + str(apt_dir / "sources.list"),
            "-o", "Dir::Etc::SourceParts=" + str(apt_dir / "parts"),
            "-o", "Dir::State=" + str(apt_dir / "state"),
            "-o", "Dir::State::Lists=" + str(apt_dir / "lists"),
            "-o", "Dir::Cache=" + str(apt_dir / "cache"),
            "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root",
            "-q"]
    return _run(["apt-get", *opts, *args], cwd, f"apt-get {args[0]}")


def _fetch(version):
    """The source package's .dsc, fetched once per version."""
    apt_dir = _work() / "apt"
    dsc = apt_dir / "dl" / f"{PACKAGE}_{version.split(':')[-1]}.dsc"
    if dsc.is_file():
        return dsc
    entries = deb_src_entries(_host_sources())
    if not entries:
        raise BuildError("no deb entry in /etc/apt/sources.list* to take "
                         "the iproute2 source from")
    for sub in ("parts", "state", "lists/partial", "cache/archives/partial",
                "dl"):
        (apt_dir / sub).mkdir(parents=True, exist_ok=True)
    (apt_dir / "sources.list").write_text("\n".join(entries) + "\n")
    _apt(apt_dir, "update")
    _apt(apt_dir, "source", "--download-only", f"{PACKAGE}={version}",
         cwd=apt_dir / "dl")
    if not dsc.is_file():
        raise BuildError(f"apt-get source left no {dsc.name}")
    return dsc


def _run(argv, cwd, what):
    res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        tail = (res.stderr.strip() or res.stdout.strip()).splitlines()[-5:]
        raise BuildError(f"{what}: {' '.join(argv)} exited "
                         f"{res.returncode}: " + " / ".join(tail))
    return res


def _stamp_text(version):
    h = hashlib.sha256(version.encode())
    for p in patch_files():
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest() + "\n"


def build_dcb(force=False):
    """BUILD/iproute2/dcb, rebuilt when the version or a patch changed."""
    version = _installed_version()
    out = dcb_binary()
    stamp = out.with_name(".dcb-inputs")
    want = _stamp_text(version)
    if not force and out.is_file() and stamp.is_file() and \
            stamp.read_text() == want:
        say(f"dcb: up to date ({PACKAGE} {version}, "
            f"{len(patch_files())} patch(es))")
        return out
    with Step(f"fetch {PACKAGE} {version} source"):
        dsc = _fetch(version)
    src = _work() / "src"
    with Step("unpack and patch"):
        shutil.rmtree(src, ignore_errors=True)
        _run(["dpkg-source", "--no-copy", "-x", str(dsc), str(src)],
             dsc.parent, "unpack")
        for p in patch_files():
            _run(["patch", "-p1", "--batch", "--forward", "-i", str(p)],
                 src, f"patch {p.name}")
    with Step("build dcb"):
        jobs = f"-j{os.cpu_count() or 1}"
        _run(["./configure"], src, "configure")
        _run(["make", jobs, "SUBDIRS=lib dcb"], src, "make")
        tmp = out.with_name(".dcb.tmp")
        shutil.copy2(src / "dcb" / "dcb", tmp)
        # Every MiB of the image raises the guests' memory floor by 3 MiB
        # (dcblab/lab/memory.py): no symbols.
        _run(["strip", str(tmp)], out.parent, "strip")
        os.replace(tmp, out)
        stamp.write_text(want)
    return out
