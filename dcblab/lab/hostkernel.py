"""What the lab's wire needs from the host's kernel, checked before `up`.

The wire (wire.py) makes taps and joins them with tc: the host kernel
needs tun, sch_ingress, cls_u32 and act_mirred. On a kernel built with
modules, the first `ip tuntap add` or `tc qdisc add ... ingress` would
make the kernel load the module itself (request_module), and dcblab never
loads anything into the host's kernel. So `up` looks first: each one must
be built in (modules.builtin) or already loaded (/proc/modules); if not,
it refuses, naming the modules and the one command an administrator runs
once. A kernel without module support (no /proc/modules, this machine's)
has them built in or not at all, and then the wire's own command fails
with the kernel's error.
"""

import os
from pathlib import Path

from .runs import LabError

__all__ = ["WIRE_MODULES", "unloaded_modules", "check_wire_modules"]

WIRE_MODULES = ("tun", "sch_ingress", "cls_u32", "act_mirred")


def _names(lines):
    """Module names from /proc/modules lines or modules.builtin paths."""
    out = set()
    for line in lines:
        word = line.split()[0] if line.strip() else ""
        name = os.path.basename(word)
        for suffix in (".ko", ".ko.xz", ".ko.zst", ".ko.gz"):
            if name.endswith(suffix):
                name = name[:-len(suffix)]
        if name:
            out.add(name.replace("-", "_"))
    return out


def unloaded_modules(needed=WIRE_MODULES, proc_modules="/proc/modules",
                     modules_dir=None):
    """The NEEDED modules that are neither built in nor loaded; [] on a
    kernel without module support."""
    try:
        loaded = _names(Path(proc_modules).read_text().splitlines())
    except FileNotFoundError:
        return []
    modules_dir = Path(modules_dir or f"/lib/modules/{os.uname().release}")
    try:
        builtin = _names((modules_dir / "modules.builtin").read_text()
                         .splitlines())
    except FileNotFoundError:
        builtin = set()
    return [m for m in needed if m not in loaded | builtin]


def check_wire_modules(**kw):
    missing = unloaded_modules(**kw)
    if missing:
        raise LabError(
            f"the host kernel has {', '.join(missing)} as module"
            f"{'s' if len(missing) > 1 else ''} not loaded, and dcblab "
            "never loads anything into the host's kernel: load "
            f"{'them' if len(missing) > 1 else 'it'} once as root "
            f"(`modprobe -a {' '.join(missing)}`), then `dcblab up` again")
