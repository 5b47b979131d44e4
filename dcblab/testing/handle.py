"""A lab as tests, scenarios and the demo see it: ``lab.h1`` is a Guest."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

from ..core.bzimage import runs_build
from ..lab import Lab
from ..lab.baseline import restore
from .guest import Guest

__all__ = ["LabHandle"]


class LabHandle:
    """A running Lab with a recording Guest per host (``lab.h1``)."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.name = lab.name
        self.topology = lab.topology
        self.wire = lab.wire
        self.guests = {n: Guest(m) for n, m in lab.machines.items()}
        self._restored = {}  # host -> keeper's call count after a restore

    def __getattr__(self, name: str) -> Guest:
        try:
            return self.__dict__["guests"][name]
        except KeyError:
            raise AttributeError(name) from None

    def guest(self, name: str) -> Guest:
        self.lab.machine(name)  # one-line error for unknown/stopped hosts
        return self.guests[name]

    def not_running(self, bzimage: str | Path) -> dict[str, str]:
        """{host: its /proc/version} of the guests that do not run the
        build of bzimage (empty: all do)."""
        found = {n: g.read("/proc/version").strip()
                 for n, g in self.guests.items()}
        return {n: v for n, v in found.items() if not runs_build(v, bzimage)}

    def restore(self) -> list[str]:
        """Back to the baseline in every guest that anyone (this process,
        a `dcblab exec`, ...) sent an agent command since the last
        restore: see guest-image/restore. Changes made by typing into a
        guest's shell or console are not seen."""
        status = self.lab.request({"op": "status"}, timeout=30)
        # A cable a test pulled (`dcblab link LINK down`) is plugged back
        # first: the guests' restore then sees their carrier.
        for end in status.get("unplugged", []):
            host, nic = end.split(":")
            self.lab.request({"op": "set_link", "host": host, "nic": nic,
                              "up": True}, timeout=30)
        calls = status["calls"]
        hosts = [h for h in self.topology.hosts
                 if calls[h.name] != self._restored.get(h.name)]

        def one(host):
            restore(self.guests[host.name], host, self.topology.dcbx)
        # The guests restore in parallel; the first failure is raised.
        with concurrent.futures.ThreadPoolExecutor() as pool:
            for f in [pool.submit(one, h) for h in hosts]:
                f.result()
        if hosts:
            self._restored = self.lab.calls()
        return [h.name for h in hosts]
