"""How a VM runs: the Backend interface and its registry.

``get(name)`` gives a backend by name ("qemu" today); each backend is one
module registering one class (see base.py).
"""

from .base import (Backend, Machine, TapNic, VmError, VmSpec, get, names,
                   register)
from .qemu import QemuBackend, QemuVm, choose_accel, probe_kvm

__all__ = ["Backend", "Machine", "TapNic", "VmError", "VmSpec", "get",
           "names", "register", "QemuBackend", "QemuVm", "choose_accel",
           "probe_kvm", "DEFAULT"]

DEFAULT = "qemu"
