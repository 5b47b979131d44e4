"""Namespaces and mounts: mount(2), umount2(2), unshare(2) through libc,
and the argv that runs a command in a network namespace file.

util-linux's mount(8) and umount(8) keep util-linux's own table,
/run/mount/utab, and create /run/mount for it on first use: a lab that
ran them in the host's mount namespace would leave that directory behind
on a machine that never had it. The calls here change the mount table
and nothing else.
"""

import ctypes
import os

__all__ = ["mount", "umount", "unshare", "is_mountpoint", "in_netns", "MS_BIND",
           "MS_REC", "MS_PRIVATE", "MS_RDONLY", "MS_NOSUID", "MS_NODEV",
           "MNT_DETACH", "CLONE_NEWNS", "CLONE_NEWNET"]

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 0x2
CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _b(s):
    return None if s is None else os.fsencode(s)


def mount(source, target, fstype=None, flags=0, data=None):
    _check(_libc.mount(_b(source), _b(target), _b(fstype),
                       ctypes.c_ulong(flags), _b(data)),
           f"mount {source} on {target}")


def umount(target, flags=MNT_DETACH):
    _check(_libc.umount2(_b(target), flags), f"umount {target}")


def unshare(flags):
    _check(_libc.unshare(flags), "unshare")


def is_mountpoint(path):
    """True when PATH is the target of a mount in this mount namespace."""
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            # Field 5 is the mount point, with spaces and the like octal-
            # escaped.
            point = line.split()[4].encode().decode("unicode_escape")
            if point == path:
                return True
    return False


def in_netns(netns, argv):
    """ARGV run in the network namespace bound on the file NETNS (a lab's
    RUNDIR/netns): nsenter, which changes nothing but the namespace (`ip
    netns exec` also mounts a /sys of its own and needs the name in
    /run/netns)."""
    return ["nsenter", f"--net={netns}", *argv]
