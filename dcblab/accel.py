"""Which QEMU accelerator to use: TCG unless a KVM probe boot succeeds.

On these machines /dev/kvm exists but a KVM guest hangs at boot (nested
virtualisation), so KVM is used only after a short probe boot under KVM
printed init's probe line.  The result is cached per host boot in
BUILD/accel-probe; ``DCBLAB_ACCEL=tcg|kvm`` skips the probe.
"""

import os
import tempfile
from pathlib import Path

from . import paths
from .vm import Vm, VmError, VmSpec

__all__ = ["choose_accel", "probe_kvm"]

PROBE_TIMEOUT = 5.0


def _boot_id():
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def probe_kvm(kernel, initrd, timeout=PROBE_TIMEOUT):
    """True if a KVM guest reaches init's probe line within timeout."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    with tempfile.TemporaryDirectory(prefix="dcblab-probe-") as d:
        vm = Vm(VmSpec("kvm-probe", kernel, initrd, cpus=1, accel="kvm",
                       cmdline=("dcblab.probe",)), d)
        try:
            vm.start()
            vm.console.wait_for(r"dcblab-init: probe ok", timeout, vm.alive)
            return True
        except (TimeoutError, VmError):
            return False
        finally:
            vm.stop(grace=1.0)


def choose_accel(kernel, initrd):
    forced = os.environ.get("DCBLAB_ACCEL", "auto")
    if forced in ("tcg", "kvm"):
        return forced
    if forced != "auto":
        raise ValueError(f"DCBLAB_ACCEL={forced!r}: use tcg, kvm or auto")
    cache = paths.build_dir() / "accel-probe"
    # The hang is the host's (nested virtualisation), not our kernel's:
    # one probe per host boot.
    key = _boot_id()
    if cache.exists():
        k, _, result = cache.read_text().strip().rpartition(" ")
        if k == key:
            return result
    result = "kvm" if probe_kvm(kernel, initrd) else "tcg"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(f"{key} {result}\n")
    return result
