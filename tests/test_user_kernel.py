"""Your own kernel change (docs/own-kernel.md), host side, no VM:
`make test PATCHES=DIR` (the user's patches after the series, in a variant
build of their own) and `make test KERNEL=PATH` (a bzImage built
elsewhere, its embedded config checked before a lab boots)."""

import gzip
import os
import struct
import subprocess
import sys

import pytest

from dcblab import build
from dcblab.build.series import first_failure
from dcblab.core import paths
from dcblab.core.bzimage import (BUILD_ONLY, MARKER, missing_options,
                                 needed_options)
from dcblab.lab import snapshots

variants = build.variants


def _patches(d, names, series=None):
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        (d / n).write_text(f"patch {n}\n")
    if series is not None:
        (d / "series").write_text(series)
    return d


def test_user_patches_apply_in_name_order_without_a_series(tmp_path):
    d = _patches(tmp_path / "mine", ["0002-b.patch", "0001-a.patch",
                                     "0010-c.patch"])
    (d / "notes.txt").write_text("not a patch\n")
    assert [p.name for p in variants.user_patches(d)] == [
        "0001-a.patch", "0002-b.patch", "0010-c.patch"]


def test_a_series_file_gives_the_order_and_the_choice(tmp_path):
    d = _patches(tmp_path / "mine", ["a.patch", "b.patch", "unused.patch"],
                 series="# mine\nb.patch\na.patch -p1\n")
    assert [p.name for p in variants.user_patches(d)] == ["b.patch",
                                                          "a.patch"]


def test_a_series_naming_a_missing_patch_names_it(tmp_path):
    d = _patches(tmp_path / "mine", ["a.patch"],
                 series="a.patch\ngone.patch\n")
    with pytest.raises(build.BuildError) as e:
        variants.user_patches(d)
    assert str(e.value) == (f"{d / 'series'}: patch 'gone.patch' is listed "
                            f"but {d / 'gone.patch'} does not exist")


def test_a_directory_without_patches_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(build.BuildError) as e:
        variants.user_patches(tmp_path / "empty")
    assert str(e.value) == (f"PATCHES={tmp_path / 'empty'}: no *.patch "
                            "files and no series file naming any")


def test_the_user_patches_follow_the_series_in_their_own_folder(
        tmp_path, monkeypatch):
    ours = _patches(tmp_path / "kernel-patches", ["0001-a.patch"],
                    series="0001-a.patch\n")
    (ours / "lab.config").write_text("CONFIG_NET=y\n")
    monkeypatch.setattr(paths, "PATCH_DIR", ours)
    # Same name as ours: kept apart under USER_DIR/.
    mine = variants.user_patches(_patches(tmp_path / "mine",
                                          ["0001-a.patch", "0002-x.patch"]))
    dest = tmp_path / "variant"
    variants.patch_dir_with(mine, dest)
    u = variants.USER_DIR
    assert build.read_series(dest) == ["0001-a.patch", f"{u}/0001-a.patch",
                                       f"{u}/0002-x.patch"]
    assert (dest / "lab.config").read_text() == "CONFIG_NET=y\n"
    # A patch dropped from the directory leaves the variant's copy too.
    variants.patch_dir_with(mine[:1], dest)
    assert not (dest / u / "0002-x.patch").exists()
    assert build.read_series(dest)[-1] == f"{u}/0001-a.patch"


def test_the_variant_dir_changes_with_a_patchs_content(tmp_path):
    d = _patches(tmp_path / "mine", ["0001-a.patch"])
    first = variants.plus_name(variants.user_patches(d))
    assert first == variants.plus_name(variants.user_patches(d))
    (d / "0001-a.patch").write_text("patch 0001-a.patch, edited\n")
    second = variants.plus_name(variants.user_patches(d))
    assert second != first
    assert second.startswith("plus-") and len(second) == len("plus-") + 12


def _failing_apply(tmp_path):
    """A real quilt failure: (its BuildError's text, the patch dir)."""
    src = tmp_path / "src"
    (src / "net").mkdir(parents=True)
    (src / "net/a.c").write_text("one\ntwo\nthree\n")
    pd = tmp_path / "pd"
    (pd / "user").mkdir(parents=True)
    (pd / "user/0001-x.patch").write_text(
        "--- a/net/a.c\n+++ b/net/a.c\n@@ -1,3 +1,3 @@\n one\n-TWO\n+2\n"
        " three\n")
    (pd / "series").write_text("user/0001-x.patch\n")
    with pytest.raises(build.BuildError) as e:
        build.apply_patches(src, pd, tmp_path / "applied.json")
    return str(e.value), pd


def test_the_first_failing_hunk_is_found_in_quilts_report(tmp_path):
    text, _ = _failing_apply(tmp_path)
    assert first_failure(text) == ("user/0001-x.patch",
                                   "net/a.c: hunk #1 FAILED")
    assert first_failure("dcblab: build: 3 objects so far") is None


def test_a_user_patch_that_does_not_apply_is_one_line(tmp_path,
                                                      monkeypatch):
    text, _ = _failing_apply(tmp_path)
    ours = _patches(tmp_path / "kernel-patches", [], series="")
    monkeypatch.setattr(paths, "PATCH_DIR", ours)
    monkeypatch.setenv("BUILD", str(tmp_path / "build"))
    report = tmp_path / "report"
    report.write_text(f"dcblab: patch ...\ndcblab: error: {text}\n")
    # The build's process, as `python3 -m dcblab.build kernel` fails.
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\ncat {report}\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    mine = _patches(tmp_path / "mine", ["0001-x.patch"])
    with pytest.raises(build.BuildError) as e:
        variants.kernel_with(mine, progress=lambda line: None)
    assert str(e.value) == (
        f"PATCHES: {mine / '0001-x.patch'} does not apply after "
        f"{ours / 'series'}: net/a.c: hunk #1 FAILED")


def test_our_built_kernel_has_every_option_the_labs_need():
    if not paths.bzimage().is_file():
        pytest.skip(f"no {paths.bzimage()}: make kernel builds it")
    assert missing_options(paths.bzimage()) == []


def _fake_bzimage(path, kernel):
    """A bzImage whose setup header points at kernel, gzipped."""
    payload = gzip.compress(kernel)
    head = bytearray(5 * 512)         # boot sector + 4 setup sectors
    head[0x1F1] = 4
    head[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", head, 0x206, 0x20F)
    struct.pack_into("<II", head, 0x248, 0x100, len(payload))
    path.write_bytes(bytes(head) + bytes(0x100) + payload)
    return path


def _with_config(path, config):
    """A fake bzImage whose kernel embeds config (CONFIG_IKCONFIG's way)."""
    return _fake_bzimage(path, b"\x90" * 100 + MARKER +
                         gzip.compress(config.encode()) + b"IKCFG_ED")


def test_a_bzimage_without_an_embedded_config_is_one_line(tmp_path):
    bz = _fake_bzimage(tmp_path / "bzImage", b"\x90" * 4096)
    assert missing_options(bz) == [
        f"KERNEL: {bz} has no embedded config: build it with "
        "CONFIG_IKCONFIG=y so its options can be checked"]


def test_an_option_the_labs_need_missing_is_one_line_saying_why(tmp_path):
    needed = needed_options()
    assert "CONFIG_VIRTIO_NET" in needed and not set(needed) & set(BUILD_ONLY)
    config = "".join(f"{k}=y\n" for k in needed if k != "CONFIG_VIRTIO_NET")
    config += "CONFIG_VIRTIO_NET=m\n"       # a module: no use in the guest
    bz = _with_config(tmp_path / "bzImage", config)
    assert missing_options(bz) == [
        f"KERNEL: {bz} lacks CONFIG_VIRTIO_NET (needed for "
        f"{needed['CONFIG_VIRTIO_NET']})"]


def test_a_lab_on_an_unfit_kernel_stops_before_it_boots(tmp_path,
                                                        monkeypatch):
    monkeypatch.setenv("BUILD", str(tmp_path / "build"))
    paths.initramfs().parent.mkdir(parents=True)
    paths.initramfs().write_bytes(b"")
    bz = _fake_bzimage(tmp_path / "bzImage", b"\x90" * 4096)
    monkeypatch.setenv(paths.KERNEL_ENV, str(bz))
    with pytest.raises(paths.UnfitKernel) as e:
        paths.check_images()
    assert str(e.value) == missing_options(bz)[0]


def test_another_kernel_has_a_snapshot_slot_of_its_own(tmp_path,
                                                       monkeypatch):
    monkeypatch.delenv(paths.KERNEL_ENV, raising=False)
    flavours = snapshots.slot_name("two-hosts", "qemu", "lab")
    assert flavours == "two-hosts-qemu-lab"
    monkeypatch.setenv(paths.KERNEL_ENV, str(paths.bzimage("lab")))
    assert snapshots.slot_name("two-hosts", "qemu", "lab") == flavours
    slots = set()
    for other in ("a/bzImage", "b/bzImage"):
        monkeypatch.setenv(paths.KERNEL_ENV, str(tmp_path / other))
        slots.add(snapshots.slot_name("two-hosts", "qemu", "lab"))
    assert len(slots) == 2 and flavours not in slots
    assert all(s.startswith(flavours + "-k") for s in slots)


def test_kernel_with_needs_its_directory():
    r = subprocess.run([sys.executable, "-m", "dcblab.build", "kernel-with"],
                       capture_output=True, text=True, cwd=paths.ROOT)
    assert (r.returncode, r.stderr) == (
        2, "dcblab: error: kernel-with needs --patches DIR\n")


# --- the plugin's --dcblab-kernel and dcblab test's --dcblab-patches -------

def _inner(tmp_path, *args, cmd=None):
    (tmp_path / "test_k.py").write_text("def test_k(lab): pass\n")
    argv = cmd or [sys.executable, "-m", "pytest", "-p",
                   "dcblab.testing.plugin"]
    env = {k: v for k, v in os.environ.items() if k != paths.KERNEL_ENV}
    env["PYTHONPATH"] = str(paths.ROOT)
    return subprocess.run([*argv, "-p", "no:cacheprovider", *args,
                           "test_k.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)


def test_dcblab_kernel_without_the_options_stops_the_run_in_one_line(
        tmp_path):
    """Before any lab boots: the whole output of the run is the line."""
    _fake_bzimage(tmp_path / "bzImage", b"\x90" * 4096)
    r = _inner(tmp_path, "--dcblab-kernel", "bzImage")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == (
        f"Exit: dcblab: KERNEL: {tmp_path / 'bzImage'} has no embedded "
        "config: build it with CONFIG_IKCONFIG=y so its options can be "
        "checked")
    assert "test_k" not in r.stdout


def test_dcblab_kernel_naming_no_file_is_one_line(tmp_path):
    r = _inner(tmp_path, "--dcblab-kernel", "nowhere/bzImage")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == (
        "Exit: dcblab: --dcblab-kernel nowhere/bzImage: no such file")


def test_dcblab_patches_outside_dcblab_test_says_to_use_it(tmp_path):
    r = _inner(tmp_path, "--dcblab-patches", "mine")
    assert r.returncode == 2
    assert "run it as `dcblab test --dcblab-patches DIR ...`" in \
        r.stderr.strip().splitlines()[-1]


def test_dcblab_test_refuses_patches_and_a_kernel_together(tmp_path):
    r = _inner(tmp_path, "--dcblab-patches", "mine", "--dcblab-kernel", "k",
               cmd=[sys.executable, str(paths.ROOT / "bin" / "dcblab"),
                    "test"])
    assert r.returncode == 2
    assert r.stderr.strip() == ("dcblab: test: --dcblab-patches DIR or "
                                "--dcblab-kernel BZIMAGE, not both")


def test_our_built_kernel_is_accepted_by_dcblab_kernel(tmp_path):
    """--collect-only: the check passes and the run goes on to collect."""
    r = _inner(tmp_path, "--dcblab-kernel", str(paths.bzimage("lab")),
               "--collect-only")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"kernel {paths.bzimage('lab')} (" in r.stdout


def test_a_kernel_with_a_periodic_tick_is_accepted(tmp_path):
    """lab.config's NO_HZ_IDLE only spares the host CPU under TCG: a
    user's kernel that ticks periodically (tinyconfig's choice) is not
    refused for it."""
    needed = needed_options()
    assert "CONFIG_NO_HZ_IDLE" not in needed
    config = "".join(f"{k}=y\n" for k in needed) + "CONFIG_HZ_PERIODIC=y\n"
    bz = _with_config(tmp_path / "bzImage", config)
    assert missing_options(bz) == []
