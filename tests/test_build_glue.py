"""make kernel's glue: fragment checks, flavours and patch failure reports."""

import shutil
import subprocess

import pytest

from dcblab import build
from dcblab.core import FLAVOURS, DcblabError, UsageError, flavour, paths

pytestmark = pytest.mark.skipif(shutil.which("quilt") is None,
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
