"""dcblab never loads a module into the host's kernel: on a modular host,
`up` refuses while a module the wire needs is neither built in nor loaded
(the kernel would load it itself at the first tc command)."""

import pytest

from dcblab.lab import hostkernel
from dcblab.lab.hostkernel import WIRE_MODULES, unloaded_modules


def test_wire_modules_not_loaded_are_named(tmp_path):
    """A modular host: tun and sch_ingress loaded, cls_u32 built in,
    act_mirred neither: `up` must refuse and name act_mirred (the first
    tc filter would otherwise make the kernel load it)."""
    (tmp_path / "modules").write_text(
        "tun 61440 4 - Live 0x0\nsch_ingress 16384 0 - Live 0x0\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "modules.builtin").write_text(
        "kernel/net/sched/cls_u32.ko\nkernel/fs/ext4/ext4.ko\n")
    assert unloaded_modules(proc_modules=tmp_path / "modules",
                            modules_dir=tmp_path / "lib") == ["act_mirred"]


def test_a_kernel_without_modules_needs_nothing_loaded(tmp_path):
    assert unloaded_modules(proc_modules=tmp_path / "absent") == []


def test_up_refuses_when_a_wire_module_is_not_loaded(monkeypatch):
    monkeypatch.setattr(hostkernel, "unloaded_modules",
                        lambda **kw: list(WIRE_MODULES[2:]))
    with pytest.raises(hostkernel.LabError) as e:
        hostkernel.check_wire_modules()
    assert str(e.value) == (
        "the host kernel has cls_u32, act_mirred as modules not loaded, and "
        "dcblab never loads anything into the host's kernel: load them once "
        "as root (`modprobe -a cls_u32 act_mirred`), then `dcblab up` again")
