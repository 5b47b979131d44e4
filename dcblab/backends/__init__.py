"""How a VM runs: the Backend interface and its registry.

``get(name)`` gives a backend by name: "qemu" (QEMU run directly, the
default) or "libvirt" (transient domains of a private libvirtd per lab);
DCBLAB_BACKEND picks the default. Each backend is one module registering
one class (see base.py).
"""

from .base import (DEFAULT, Backend, Machine, TapNic, VmError, VmSpec,
                   default_name, get, names, register)
from .libvirt import LibvirtBackend, domain_xml
from .qemu import QemuBackend, QemuVm, choose_accel, probe_kvm

__all__ = ["Backend", "Machine", "TapNic", "VmError", "VmSpec", "get",
           "names", "register", "QemuBackend", "QemuVm", "choose_accel",
           "probe_kvm", "DEFAULT", "default_name", "LibvirtBackend",
           "domain_xml"]
