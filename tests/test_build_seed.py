"""A variant's first build starts from the lab kernel's objects
(dcblab/build/seed.py). These check what seed() does to a directory;
that make then builds the right kernel from it is checked by the
variants' own tests, on kernels that differ from the lab kernel in
behaviour: lab 14 without patch 0004 (tests/test_lab_without_patch.py)
and the series plus a user's patch (tests/test_writing_tests_doc.py)."""

import json
import os

import pytest

from dcblab.build import seed as seed_mod
from dcblab.core import paths

OLD_NS = 1_600_000_000_000_000_000     # objects' and sources' mtime


@pytest.fixture
def trees(tmp_path, monkeypatch):
    """A base BUILD with a finished lab build, and a variant BUILD under
    it with its tree extracted (no objects)."""
    base = tmp_path / "build"
    var = base / "variants" / "without-0004"
    monkeypatch.setattr(seed_mod, "tarball_id", lambda: "tarball 1")
    monkeypatch.setattr(seed_mod, "tool_version", lambda argv: "gcc 12")
    src, obj = base / "linux-source-6.1", base / "kernel-obj"
    for f in ("net/core/dev.c", "drivers/net/virtio_net.c", "init/main.c"):
        for tree in (src, var / "linux-source-6.1"):
            (tree / f).parent.mkdir(parents=True, exist_ok=True)
            (tree / f).write_text("int x;\n")
            os.utime(tree / f, ns=(OLD_NS, OLD_NS))
    (obj / "net/core").mkdir(parents=True)
    (obj / "arch/x86/boot").mkdir(parents=True)
    (obj / "arch/x86/boot/bzImage").write_bytes(b"MZ\0kernel")
    (obj / "net/core/dev.o").write_bytes(b"\x7fELF\0" + str(src).encode())
    (obj / "net/core/.dev.o.cmd").write_text(
        f"cmd_net/core/dev.o := gcc -I{src}/include -c {src}/net/core/dev.c"
        f"\ndeps_net/core/dev.o := {src}/net/core/dev.c "
        f"{obj}/include/generated/autoconf.h\n")
    (obj / "Makefile").write_text(f"include {src}/Makefile\n")
    (obj / "source").symlink_to(src)
    (obj / ".dcblab-kernel-inputs").write_text(json.dumps({"inputs": {
        "linux-source-6.1": "tarball 1", "gcc": "gcc 12",
        "tree/net/core/dev.c": "d1", "tree/drivers/net/virtio_net.c": "v1"}}))
    (obj / ".dcblab-config-inputs").write_text("config inputs")
    (obj / "dcblab-build.log").write_text("  CC net/core/dev.o\n")
    for f in obj.rglob("*"):
        if not f.is_symlink():
            os.utime(f, ns=(OLD_NS + 10, OLD_NS + 10))
    monkeypatch.setenv("BUILD", str(var))
    return base, var


def test_objects_are_copied_with_their_mtimes_and_paths_made_the_variants(
        trees):
    base, var = trees
    said = seed_mod.seed("lab", base)
    assert said.startswith(f"objects of {base / 'kernel-obj'} copied, 2 "
                           "files' paths rewritten, 2 patched files marked "
                           "changed, in "), said
    obj, src = var / "kernel-obj", var / "linux-source-6.1"
    assert obj == paths.kernel_obj("lab")
    cmd = (obj / "net/core/.dev.o.cmd").read_text()
    assert cmd == (f"cmd_net/core/dev.o := gcc -I{src}/include -c "
                   f"{src}/net/core/dev.c\ndeps_net/core/dev.o := "
                   f"{src}/net/core/dev.c {obj}/include/generated/"
                   "autoconf.h\n")
    assert (obj / "Makefile").read_text() == f"include {src}/Makefile\n"
    assert os.readlink(obj / "source") == str(src)
    # Binary files are not edited; everything keeps its mtime.
    assert (obj / "net/core/dev.o").read_bytes() == \
        (base / "kernel-obj/net/core/dev.o").read_bytes()
    for f in ("net/core/dev.o", "net/core/.dev.o.cmd", "Makefile",
              "arch/x86/boot/bzImage"):
        assert (obj / f).stat().st_mtime_ns == OLD_NS + 10, f
    # The base's own steps' files stay with the base.
    for f in seed_mod.NOT_COPIED:
        assert not (obj / f).exists() and (base / "kernel-obj" / f).exists()
    assert not list(var.glob("*.seed.tmp"))


def test_files_the_base_had_patched_are_newer_than_the_objects(trees):
    """So make compiles them again, patched by the variant's series or
    not; the others keep the mtime tar gave them."""
    base, var = trees
    seed_mod.seed("lab", base)
    src = var / "linux-source-6.1"
    dev_o = (var / "kernel-obj/net/core/dev.o").stat().st_mtime_ns
    for f in ("net/core/dev.c", "drivers/net/virtio_net.c"):
        assert (src / f).stat().st_mtime_ns > dev_o, f
    assert (src / "init/main.c").stat().st_mtime_ns == OLD_NS


def test_a_variant_with_objects_of_its_own_is_left_alone(trees):
    base, var = trees
    (var / "kernel-obj").mkdir()
    (var / "kernel-obj/.config").write_text("CONFIG_X=y\n")
    assert seed_mod.seed("lab", base) == \
        f"{var / 'kernel-obj'} exists: built on its own objects"
    assert [f.name for f in (var / "kernel-obj").iterdir()] == [".config"]


@pytest.mark.parametrize("spoil, why", [
    (lambda obj: (obj / ".dcblab-kernel-inputs").unlink(),
     "{obj} has no finished build"),
    (lambda obj: (obj / "arch/x86/boot/bzImage").unlink(),
     "{obj} has no bzImage"),
    (lambda obj: _stamp(obj, "linux-source-6.1", "tarball 0"),
     "{obj} was built from another linux-source-6.1"),
    (lambda obj: _stamp(obj, "gcc", "gcc 11"),
     "{obj} was built by another gcc"),
], ids=["unfinished", "no-bzimage", "other-tree", "other-gcc"])
def test_a_base_that_cannot_serve_means_a_cold_build(trees, spoil, why):
    base, var = trees
    spoil(base / "kernel-obj")
    said = seed_mod.seed("lab", base)
    assert said == (f"no objects to start from "
                    f"({why.format(obj=base / 'kernel-obj')}): a cold build")
    assert not (var / "kernel-obj").exists()
    assert (var / "linux-source-6.1/net/core/dev.c").stat().st_mtime_ns == \
        OLD_NS


def _stamp(obj, key, value):
    f = obj / ".dcblab-kernel-inputs"
    d = json.loads(f.read_text())
    d["inputs"][key] = value
    f.write_text(json.dumps(d))


def test_the_debug_flavour_seeds_from_the_debug_objects(trees):
    base, var = trees
    assert seed_mod.seed("debug", base) == (
        f"no objects to start from ({base / 'kernel-obj-debug'} has no "
        "finished build): a cold build")


def test_files_the_variants_own_series_patched_already_are_marked_too(
        trees):
    """A variant tree patched by an earlier run whose objects were removed
    since: its patched files are not newer than the base's objects."""
    base, var = trees
    src = var / "linux-source-6.1"
    backup = src / ".pc/0001-mine.patch/init/main.c"
    backup.parent.mkdir(parents=True)
    backup.write_text("int x;\n")
    said = seed_mod.seed("lab", base)
    assert "3 patched files marked changed" in said, said
    assert (src / "init/main.c").stat().st_mtime_ns > \
        (var / "kernel-obj/net/core/dev.o").stat().st_mtime_ns
