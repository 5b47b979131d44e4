"""A lab as tests, scenarios and the demo see it: ``lab.h1`` is a Guest."""

import concurrent.futures

from ..lab import baseline_devices
from .guest import Guest

__all__ = ["LabHandle"]


class LabHandle:
    """A running Lab with a recording Guest per host (``lab.h1``)."""

    def __init__(self, lab):
        self.lab = lab
        self.name = lab.name
        self.topology = lab.topology
        self.wire = lab.wire
        self.guests = {n: Guest(m) for n, m in lab.machines.items()}

    def __getattr__(self, name):
        try:
            return self.__dict__["guests"][name]
        except KeyError:
            raise AttributeError(name) from None

    def guest(self, name):
        self.lab.machine(name)  # one-line error for unknown/stopped hosts
        return self.guests[name]

    def restore(self):
        """Back to the baseline in every guest: see guest-image/restore."""
        def one(host):
            self.guests[host.name].run(["dcblab-restore",
                                        *baseline_devices(host)])
        # The guests restore in parallel; the first failure is raised.
        with concurrent.futures.ThreadPoolExecutor() as pool:
            for f in [pool.submit(one, h) for h in self.topology.hosts]:
                f.result()
