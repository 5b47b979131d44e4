"""make kernel's glue: the lab.config check and patch failure reports."""

import shutil
import subprocess

import pytest

from dcblab import build

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
        (build.paths.PATCH_DIR / "lab.config").read_text())
    assert opts["CONFIG_CGROUP_NET_PRIO"] == "y"


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
