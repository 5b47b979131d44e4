"""make kernel's glue: fragment checks, flavours, patch failure reports and
the stamps that skip checkpatch, check-series and the kernel's make when
nothing they read changed."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dcblab import build
from dcblab.core import FLAVOURS, DcblabError, UsageError, flavour, paths

needs_quilt = pytest.mark.skipif(shutil.which("quilt") is None,
                                 reason="quilt is not installed: run make deps")


def test_config_check_names_each_option_kconfig_dropped():
    wanted = build.parse_fragment(
        "CONFIG_NET=y   # networking\n"
        "CONFIG_CGROUP_NET_PRIO=y # net_prio\n"
        "# CONFIG_MODULES is not set\n"
        "CONFIG_NR_CPUS=8\n")
    config = ("CONFIG_NET=y\n"
              "# CONFIG_CGROUP_NET_PRIO is not set\n"
              "CONFIG_MODULES=y\n"
              "CONFIG_NR_CPUS=8\n")
    bad = build.check_config(wanted, config)
    assert bad == ["CONFIG_CGROUP_NET_PRIO: asked y, got not set",
                   "CONFIG_MODULES: asked not set, got y"]


def test_fragment_line_that_is_not_kconfig_is_an_error():
    with pytest.raises(build.BuildError, match=r"lab.config:2: not a Kconfig"):
        build.parse_fragment("CONFIG_NET=y\nNET=y\n")


def test_the_shipped_fragment_parses():
    opts = build.parse_fragment(
        (paths.PATCH_DIR / "lab.config").read_text())
    assert opts["CONFIG_CGROUP_NET_PRIO"] == "y"


@pytest.mark.parametrize("name", sorted(FLAVOURS))
def test_every_fragment_of_every_flavour_parses(name):
    for frag in build.fragment_files(name):
        assert build.parse_fragment(frag.read_text(), str(frag)), frag


def test_debug_fragment_asks_for_the_checkers_and_slub_over_slob():
    opts = build.parse_fragment(
        (paths.PATCH_DIR / "debug.config").read_text(), "debug.config")
    for name in ("CONFIG_KASAN", "CONFIG_PROVE_LOCKING",
                 "CONFIG_DEBUG_KMEMLEAK", "CONFIG_SLUB"):
        assert opts[name] == "y", name
    # Explicitly unset, not just absent: tinyconfig picks SLOB.
    assert "CONFIG_SLOB" in opts and opts["CONFIG_SLOB"] is None


def test_debug_flavour_merges_lab_config_first():
    assert [f.name for f in build.fragment_files("debug")] == \
        ["lab.config", "debug.config"]


def test_later_fragment_overrides_an_earlier_one(tmp_path):
    first, second = tmp_path / "first.config", tmp_path / "second.config"
    first.write_text("CONFIG_NET=y\nCONFIG_SLOB=y # tiny\n")
    second.write_text("# CONFIG_SLOB is not set\nCONFIG_SLUB=y\n")
    merged = build.merge_fragments([first, second])
    assert merged == {"CONFIG_NET": ("y", first),
                      "CONFIG_SLOB": (None, second),
                      "CONFIG_SLUB": ("y", second)}


def test_dropped_option_is_named_under_the_fragment_that_asked(tmp_path):
    first, second = tmp_path / "first.config", tmp_path / "second.config"
    first.write_text("CONFIG_NET=y\nCONFIG_DCB=y\n")
    second.write_text("CONFIG_KASAN=y\n")
    config = "CONFIG_NET=y\n# CONFIG_DCB is not set\n"
    dropped = build.dropped_options(build.merge_fragments([first, second]),
                                    config)
    assert dropped == [(first, ["CONFIG_DCB: asked y, got not set"]),
                       (second, ["CONFIG_KASAN: asked y, got not set"])]


def test_build_errors_are_dcblab_errors():
    assert issubclass(build.BuildError, DcblabError)
    assert issubclass(build.ConfigMismatch, build.BuildError)


def test_flavours_build_in_their_own_object_dirs_from_one_source_tree():
    objs = {paths.kernel_obj(name) for name in FLAVOURS}
    assert len(objs) == len(FLAVOURS)
    logs = {build.build_log(name) for name in FLAVOURS}
    assert len(logs) == len(FLAVOURS)
    assert all(log.parent in objs for log in logs)
    assert paths.kernel_obj("lab").parent == paths.kernel_src().parent


def test_unknown_flavour_is_a_usage_error():
    with pytest.raises(UsageError, match="nope"):
        flavour("nope")


def test_unknown_flavour_on_the_command_line_is_one_line_exit_2(capsys):
    assert build.main(["kernel", "--flavour", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'nope'" in err and "lab" in err


def test_flavour_defaults_to_the_environment(monkeypatch, capsys):
    monkeypatch.setenv("FLAVOUR", "nope-from-env")
    assert build.main(["patch"]) == 2
    assert "'nope-from-env'" in capsys.readouterr().err


def _tree(tmp_path, content):
    src = tmp_path / "src"
    (src / "net").mkdir(parents=True)
    (src / "net/a.c").write_text(content)
    return src


def _patch(tmp_path, name, before, after):
    a, b = tmp_path / "a", tmp_path / "b"
    for d, text in ((a, before), (b, after)):
        (d / "net").mkdir(parents=True, exist_ok=True)
        (d / "net/a.c").write_text(text)
    diff = subprocess.run(["diff", "-u", "--label", "a/net/a.c", "--label",
                           "b/net/a.c", str(a / "net/a.c"), str(b / "net/a.c")],
                          capture_output=True, text=True).stdout
    shutil.rmtree(a)
    shutil.rmtree(b)
    patches = tmp_path / "patches"
    patches.mkdir(exist_ok=True)
    (patches / name).write_text(f"Subject: test\n---\n{diff}")
    (patches / "series").write_text(f"{name}\n")
    return patches


@needs_quilt
def test_patch_that_does_not_apply_names_patch_and_hunk_then_recovers(tmp_path):
    lines = "".join(f"line {i}\n" for i in range(20))
    src = _tree(tmp_path, lines)
    wrong_base = lines.replace("line 10\n", "line TEN\n")
    patches = _patch(tmp_path, "0001-net-change.patch", wrong_base,
                     wrong_base.replace("line TEN\n", "line 10 patched\n"))
    record = tmp_path / "applied.json"
    with pytest.raises(build.BuildError) as e:
        build.apply_patches(src, patches, record)
    msg = str(e.value)
    assert "patch 0001-net-change.patch does not apply" in msg
    assert "net/a.c: hunk #1 FAILED" in msg
    assert "-line TEN" in msg and "+line 10 patched" in msg
    assert (src / "net/a.c").read_text() == lines  # nothing half-applied

    _patch(tmp_path, "0001-net-change.patch", lines,
           lines.replace("line 10\n", "line 10 patched\n"))
    build.apply_patches(src, patches, record)
    assert "line 10 patched\n" in (src / "net/a.c").read_text()


@needs_quilt
def test_unchanged_patch_is_not_reapplied_and_keeps_mtime(tmp_path):
    lines = "".join(f"line {i}\n" for i in range(20))
    src = _tree(tmp_path, lines)
    patches = _patch(tmp_path, "0001-x.patch", lines,
                     lines.replace("line 3\n", "line 3 patched\n"))
    record = tmp_path / "applied.json"
    build.apply_patches(src, patches, record)
    before = (src / "net/a.c").stat().st_mtime_ns
    build.apply_patches(src, patches, record)
    assert (src / "net/a.c").stat().st_mtime_ns == before
    # An edit that changes nothing of the result keeps the mtime too.
    text = (patches / "0001-x.patch").read_text()
    (patches / "0001-x.patch").write_text(text.replace("Subject: test",
                                                        "Subject: reworded"))
    build.apply_patches(src, patches, record)
    assert (src / "net/a.c").stat().st_mtime_ns == before
    assert "line 3 patched\n" in (src / "net/a.c").read_text()


# --- stamps: checkpatch, check-series and the kernel's make run only when
# what they read changed.  Fakes stand in for checkpatch.pl, git, tar and
# the kernel's make; the stamps and their inputs are real files.

class _Tools:
    """subprocess.run and Popen stand-ins that count what would have run."""

    def __init__(self):
        self.argvs = []
        self.checkpatch_out = "total: 0 errors, 0 warnings, 0 checks, 9 lines"
        self.apply_rc = 0
        self.make_rc = 0

    def ran(self, what):
        return sum(1 for argv in self.argvs if what(argv))

    def checkpatch_runs(self):
        return self.ran(lambda a: a[0].endswith("checkpatch.pl"))

    def apply_checks(self):
        return self.ran(lambda a: a[:3] == ["git", "apply", "--check"])

    def kernel_makes(self):
        return self.ran(lambda a: a[0] == "make" and "bzImage" in a)

    def run(self, argv, **kw):
        self.argvs.append(list(argv))
        rc, out = 0, ""
        if argv[0].endswith("checkpatch.pl"):
            out = self.checkpatch_out
            rc = 0 if "0 errors, 0 warnings" in out else 1
        elif argv[:3] == ["git", "apply", "--check"]:
            rc = self.apply_rc
        elif argv[1:] == ["--version"]:
            out = f"{argv[0]} 1.0\n"
        if kw.get("check") and rc:
            raise subprocess.CalledProcessError(rc, argv)
        return subprocess.CompletedProcess(argv, rc, out, "")

    def popen(self, argv, **kw):
        self.argvs.append(list(argv))
        obj = next(a for a in argv if a.startswith("O="))[2:]
        tools = self

        class Done:
            returncode = tools.make_rc

            def poll(self):
                return self.returncode

        if self.make_rc == 0:
            image = Path(obj) / "arch/x86/boot/bzImage"
            image.parent.mkdir(parents=True, exist_ok=True)
            image.write_bytes(b"bzImage " + str(len(self.argvs)).encode())
        return Done()


@pytest.fixture
def tools(tmp_path, monkeypatch):
    """A BUILD dir with an extracted tree, configured object dirs and a
    one-patch series, all in tmp_path; the tools are _Tools fakes."""
    patches = tmp_path / "kernel-patches"
    patches.mkdir()
    (patches / "0001-net-x.patch").write_text("Subject: x\n---\n")
    (patches / "series").write_text("0001-net-x.patch\n")
    (patches / "lab.config").write_text("CONFIG_NET=y\n")
    (patches / "debug.config").write_text("CONFIG_KASAN=y\n")
    tarball = tmp_path / "linux-source-6.1.tar.xz"
    tarball.write_bytes(b"tarball")
    monkeypatch.setattr(paths, "PATCH_DIR", patches)
    monkeypatch.setattr(paths, "KERNEL_TARBALL", tarball)
    monkeypatch.setenv("BUILD", str(tmp_path / "build"))
    monkeypatch.delenv("FLAVOUR", raising=False)
    src = paths.kernel_src()
    (src / "scripts").mkdir(parents=True)
    (src / "scripts/checkpatch.pl").write_text("#!/usr/bin/perl\n")
    (src / ".pc/0001-net-x.patch/net").mkdir(parents=True)
    (src / ".pc/0001-net-x.patch/net/a.c").write_text("before\n")
    (src / "net").mkdir()
    (src / "net/a.c").write_text("patched\n")
    for name in FLAVOURS:
        paths.kernel_obj(name).mkdir(parents=True)
        (paths.kernel_obj(name) / ".config").write_text(f"# {name}\n")
    fake = _Tools()
    monkeypatch.setattr(subprocess, "run", fake.run)
    monkeypatch.setattr(subprocess, "Popen", fake.popen)
    return fake


def test_checkpatch_skips_while_the_series_is_unchanged(tools, capsys):
    assert build.checkpatch() == 0
    assert build.checkpatch() == 0
    assert tools.checkpatch_runs() == 1
    assert "checkpatch: series unchanged since the last clean run" in \
        capsys.readouterr().out


def test_changed_patch_runs_checkpatch_again_and_is_named(tools, capsys):
    build.checkpatch()
    patch = paths.PATCH_DIR / "0001-net-x.patch"
    patch.write_text(patch.read_text() + "+new line\n")
    build.checkpatch()
    assert tools.checkpatch_runs() == 2
    assert "changed since the last clean run: 0001-net-x.patch" in \
        capsys.readouterr().out


def test_new_checkpatch_pl_runs_checkpatch_again(tools):
    build.checkpatch()
    script = paths.kernel_src() / "scripts/checkpatch.pl"
    script.write_text(script.read_text() + "# a newer checkpatch\n")
    build.checkpatch()
    assert tools.checkpatch_runs() == 2


def test_failed_checkpatch_leaves_no_stamp_so_the_next_run_repeats(tools):
    tools.checkpatch_out = "total: 1 errors, 0 warnings, 0 checks, 9 lines"
    assert build.checkpatch() == 1
    assert build.checkpatch() == 1
    assert tools.checkpatch_runs() == 2
    tools.checkpatch_out = "total: 0 errors, 0 warnings, 0 checks, 9 lines"
    assert build.checkpatch() == 0
    assert build.checkpatch() == 0
    assert tools.checkpatch_runs() == 3


def test_force_runs_checkpatch_despite_its_stamp(tools):
    assert build.main(["checkpatch"]) == 0
    assert build.main(["checkpatch", "--force"]) == 0
    assert tools.checkpatch_runs() == 2


def test_check_series_skips_until_the_series_file_changes(tools):
    build.check_series()
    build.check_series()
    assert tools.apply_checks() == 1
    series = paths.PATCH_DIR / "series"
    series.write_text(series.read_text() + "# reordered later\n")
    build.check_series()
    assert tools.apply_checks() == 2


def test_failed_check_series_leaves_no_stamp(tools):
    tools.apply_rc = 1
    with pytest.raises(build.BuildError, match="git apply --check"):
        build.check_series()
    tools.apply_rc = 0
    build.check_series()
    assert tools.apply_checks() == 2


def test_check_stamps_serve_every_flavour(tools, monkeypatch):
    build.checkpatch()
    build.check_series()
    monkeypatch.setenv("FLAVOUR", "debug")
    assert build.main(["checkpatch"]) == 0
    assert build.main(["check-series"]) == 0
    assert (tools.checkpatch_runs(), tools.apply_checks()) == (1, 1)


def test_forget_check_stamps_makes_the_checks_cold_and_keeps_the_kernel(tools):
    build.checkpatch()
    build.check_series()
    build.build_kernel("lab")
    assert len(build.forget_check_stamps()) == 2
    build.checkpatch()
    build.check_series()
    build.build_kernel("lab")
    assert (tools.checkpatch_runs(), tools.apply_checks(),
            tools.kernel_makes()) == (2, 2, 1)


def test_kernel_make_is_skipped_when_nothing_changed(tools, capsys):
    build.build_kernel("lab")
    build.build_kernel("lab")
    assert tools.kernel_makes() == 1
    assert "build: nothing changed since the last build" in \
        capsys.readouterr().out


def test_missing_bzimage_rebuilds_the_kernel(tools):
    build.build_kernel("lab")
    paths.bzimage("lab").unlink()
    build.build_kernel("lab")
    assert tools.kernel_makes() == 2
    assert paths.bzimage("lab").exists()


def test_bzimage_replaced_since_the_stamp_rebuilds_the_kernel(tools):
    build.build_kernel("lab")
    paths.bzimage("lab").write_bytes(b"someone else's kernel")
    build.build_kernel("lab")
    assert tools.kernel_makes() == 2


@pytest.mark.parametrize("edit", ["0001-net-x.patch", "series", "lab.config"])
def test_changed_series_or_fragment_rebuilds_the_kernel(tools, edit):
    build.build_kernel("lab")
    f = paths.PATCH_DIR / edit
    f.write_text(f.read_text() + "# edited\n")
    build.build_kernel("lab")
    assert tools.kernel_makes() == 2


def test_debug_fragment_rebuilds_only_the_debug_kernel(tools):
    for name in ("lab", "debug"):
        build.build_kernel(name)
    (paths.PATCH_DIR / "debug.config").write_text("CONFIG_KASAN=y\n"
                                                  "CONFIG_UBSAN=y\n")
    for name in ("lab", "debug"):
        build.build_kernel(name)
    built = [next(x for x in a if x.startswith("O=")) for a in tools.argvs
             if a[0] == "make"]
    assert built == [f"O={paths.kernel_obj('lab')}"] + \
        [f"O={paths.kernel_obj('debug')}"] * 2


def test_new_kernel_source_or_config_rebuilds_the_kernel(tools):
    build.build_kernel("lab")
    paths.KERNEL_TARBALL.write_bytes(b"a new Debian upload")
    build.build_kernel("lab")
    (paths.kernel_obj("lab") / ".config").write_text("# menuconfig'd\n")
    build.build_kernel("lab")
    assert tools.kernel_makes() == 3


def test_file_edited_through_quilt_rebuilds_the_kernel(tools):
    build.build_kernel("lab")
    (paths.kernel_src() / "net/a.c").write_text("patched, then edited\n")
    build.build_kernel("lab")
    assert tools.kernel_makes() == 2


def test_failed_kernel_build_leaves_no_stamp_so_the_next_run_builds(tools):
    build.build_kernel("lab")
    (paths.PATCH_DIR / "lab.config").write_text("CONFIG_NET=y\nCONFIG_X=y\n")
    tools.make_rc = 2
    with pytest.raises(build.BuildError, match="kernel build failed"):
        build.build_kernel("lab")
    tools.make_rc = 0
    build.build_kernel("lab")
    build.build_kernel("lab")
    assert tools.kernel_makes() == 3


def test_force_runs_the_kernel_make_despite_its_stamp(tools):
    build.build_kernel("lab")
    build.build_kernel("lab", force=True)
    assert tools.kernel_makes() == 2


# --- the guests' dcb (dcblab/build/iproute2.py) -----------------------------

def test_deb_src_entries_mirror_the_hosts_deb_entries():
    """apt-get source needs deb-src entries; they are made from the host's
    own deb entries (one-line and deb822), mirrors and keys kept."""
    one_line = ("deb http://deb.debian.org/debian bookworm main\n"
                "# deb http://example.org/commented bookworm main\n"
                "deb-src http://deb.debian.org/debian bookworm main\n"
                "deb [signed-by=/k.gpg] http://m.example/d bookworm main "
                "contrib # note\n")
    deb822 = ("Types: deb\n"
              "URIs: http://deb.debian.org/debian\n"
              "Suites: bookworm bookworm-updates\n"
              "Components: main\n"
              "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
              "\n"
              "Types: deb\n"
              "Enabled: no\n"
              "URIs: http://off.example/debian\n"
              "Suites: bookworm\n"
              "Components: main\n")
    got = build.iproute2.deb_src_entries([("sources.list", one_line),
                                          ("debian.sources", deb822)])
    key = "[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
    assert got == [
        "deb-src http://deb.debian.org/debian bookworm main",
        "deb-src [signed-by=/k.gpg] http://m.example/d bookworm main contrib",
        f"deb-src {key}http://deb.debian.org/debian bookworm main",
        f"deb-src {key}http://deb.debian.org/debian bookworm-updates main"]


def test_the_guests_dcb_patches_apply_in_order():
    patches = build.iproute2.patch_files()
    assert [p.name for p in patches] == \
        ["0001-dcb-read-the-ACK-that-follows-a-reply.patch"]
    assert "+++ b/dcb/dcb.c" in patches[0].read_text()


# --- the series minus one patch (make bench's kernels) -----------------------

def _patch_dir(tmp_path):
    d = tmp_path / "kernel-patches"
    d.mkdir()
    for n in ("0001-a.patch", "0002-b.patch", "0003-c.patch"):
        (d / n).write_text(f"patch {n}\n")
    (d / "lab.config").write_text("CONFIG_NET=y\n")
    (d / "series").write_text("# the series\n0001-a.patch\n0002-b.patch -p1\n"
                              "0003-c.patch\n")
    return d


def test_series_minus_one_leaves_out_that_patch_and_keeps_the_rest(
        tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "PATCH_DIR", _patch_dir(tmp_path))
    dest = tmp_path / "without"
    build.variants.patch_dir_without("0002-b.patch", dest)
    assert sorted(f.name for f in dest.iterdir()) == \
        ["0001-a.patch", "0003-c.patch", "lab.config", "series"]
    assert build.read_series(dest) == ["0001-a.patch", "0003-c.patch"]
    assert (dest / "lab.config").read_text() == "CONFIG_NET=y\n"
    # Again, for another patch: what the first left is replaced.
    build.variants.patch_dir_without("0003-c.patch", dest)
    assert build.read_series(dest) == ["0001-a.patch", "0002-b.patch"]
    assert not (dest / "0003-c.patch").exists()


def test_a_patch_is_named_by_its_number_and_a_bad_name_lists_the_series(
        tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "PATCH_DIR", _patch_dir(tmp_path))
    assert build.variants.patch_named("0002") == "0002-b.patch"
    assert build.variants.patch_named("0003-c.patch") == "0003-c.patch"
    for bad, count in (("0009", 0), ("000", 3)):
        with pytest.raises(build.BuildError) as e:
            build.variants.patch_named(bad)
        assert str(e.value) == (
            f"{bad!r} names {count} patches of {paths.PATCH_DIR}/series (it "
            "has: 0001-a.patch, 0002-b.patch, 0003-c.patch)")


def test_the_series_minus_each_patch_bench_measures_applies():
    """make bench builds the series without each patch of MEASURED: the
    rest must apply to pristine linux-source-6.1 without it."""
    names = build.read_series()
    build.check_each_applies(
        [[n for n in names if n != left_out] for left_out in
         map(build.variants.patch_named, build.variants.MEASURED)])


def test_an_interrupted_variant_build_leaves_no_process(tmp_path,
                                                         monkeypatch):
    """Ctrl-C or the bench's SIGTERM while the series-minus-one kernel
    builds stops the whole build: the build's own children too."""
    monkeypatch.setattr(paths, "PATCH_DIR", _patch_dir(tmp_path))
    monkeypatch.setenv("BUILD", str(tmp_path / "build"))
    marker = f"dcblab-variant-test-{os.getpid()}"
    fake = tmp_path / "python"
    # A "build" whose child outlives it unless its group is stopped.
    fake.write_text(f"#!/bin/sh\nsh -c 'sleep 300; : {marker}' &\n"
                    "echo 'dcblab: build: 1 objects so far'\nwait\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))

    def progress(line):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        build.variants.kernel_without("0002-b.patch", progress=progress)
    for _ in range(50):
        r = subprocess.run(["pgrep", "-f", marker], capture_output=True)
        if r.returncode == 1:
            break
        time.sleep(0.1)
    assert r.returncode == 1, f"left running: {r.stdout}"


def test_make_s_does_not_silence_the_kernel_builds_progress():
    from dcblab.build.kernel import not_silent
    assert not_silent("s -- BUILD=/b FLAVOUR=lab") == " -- BUILD=/b FLAVOUR=lab"
    assert not_silent("ks -j2 --jobserver-auth=3,4") == \
        "k -j2 --jobserver-auth=3,4"
    # No single-letter flags: nothing to take out, variables untouched.
    assert not_silent("-j2 -- A=s") == "-j2 -- A=s"
    assert not_silent("") == ""


def _ccache_compile(build_dir, env):
    """Compile one file the way kbuild does (absolute -I and source under
    the BUILD dir, -fmacro-prefix-map, from an object directory) with the
    flag make_vars adds."""
    from dcblab.build import ccache
    src, obj = build_dir / "src", build_dir / "obj"
    (src / "include").mkdir(parents=True)
    obj.mkdir()
    (src / "include/x.h").write_text("#define X 3\n")
    (src / "f.c").write_text('#include "x.h"\nint f(void) { return X; }\n'
                             'const char *g(void) { return __FILE__; }\n')
    subprocess.run(["ccache", "gcc", "-c", "-O2", "-g",
                    f"-I{src}/include", f"-fmacro-prefix-map={src}/=",
                    ccache.macro_prefix_map(src, obj), str(src / "f.c"),
                    "-o", "f.o"], cwd=obj, env=env, check=True)
    # The strings the code uses (__FILE__), not the debug info's names.
    return subprocess.run(["objdump", "-s", "-j", ".rodata.str1.1", "f.o"],
                          cwd=obj, capture_output=True, text=True,
                          check=True).stdout


def test_ccache_serves_a_second_build_dir_from_the_first(tmp_path,
                                                         monkeypatch):
    from dcblab.build import ccache
    monkeypatch.setenv("DCBLAB_CCACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DCBLAB_CCACHE", raising=False)
    assert ccache.enabled(), "ccache is not installed: run make deps"
    one, two = tmp_path / "clone1/build", tmp_path / "clone2/build"
    start = ccache.counters(one)
    _ccache_compile(one, ccache.environment(one))
    first = ccache.counters(one)
    out = _ccache_compile(two, ccache.environment(two))
    second = ccache.counters(two)
    assert ccache.summary(start, first).startswith(
        "ccache: 0 of 1 compiles from the cache")
    assert ccache.summary(first, second).startswith(
        "ccache: 1 of 1 compiles from the cache (100%)")
    # __FILE__ names the file relative to its tree, as without ccache.
    assert out.rstrip().endswith("f.c."), out


def test_ccache_off_builds_with_plain_gcc(monkeypatch):
    from dcblab.build import ccache
    monkeypatch.setenv("DCBLAB_CCACHE", "off")
    assert ccache.make_vars("/b/src", "/b/obj") == []
    assert ccache.counters("/x") == {}
    assert ccache.summary({}, {}) is None
    monkeypatch.setenv("DCBLAB_CCACHE", "maybe")
    with pytest.raises(DcblabError, match="DCBLAB_CCACHE='maybe'"):
        ccache.enabled()
