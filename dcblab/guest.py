"""A VM as tests and demos use it: commands recorded for failure reports."""

import time

from .vm import Vm

__all__ = ["Guest"]


class Guest:
    """A VM as tests use it: run() records each command for the report."""

    def __init__(self, vm: Vm):
        self.vm = vm
        self.name = vm.name
        self.history = []

    def run(self, argv, *, check=True, **kw):
        t0 = time.monotonic()
        try:
            res = self.vm.agent.run(argv, check=check, **kw)
        except Exception as e:
            self.history.append(f"{self.name}$ {_quote(argv)}  -> {e!r:.300}")
            raise
        self.history.append(f"{self.name}$ {_quote(argv)}  -> rc {res.rc} "
                            f"({(time.monotonic() - t0) * 1000:.0f} ms)")
        return res

    def read(self, path):
        return self.vm.agent.read_file(path).decode(errors="replace")

    def write(self, path, data):
        self.history.append(f"{self.name}: write {path!r} <- {data!r:.200}")
        self.vm.agent.write_file(path, data)


def _quote(argv):
    return " ".join(a if a and all(c.isalnum() or c in "-_./=:,@%+" for c in a)
                    else repr(a) for a in argv)
