"""Package surfaces imported on first use.

A command such as `dcblab exec` needs a few names of a package; importing
every module its ``__init__`` re-exports cost it ~60 ms of its ~200 ms.
``surface()`` keeps ``from dcblab.lab import Lab`` and ``__all__`` as they
were and imports a submodule only when one of its names is first used.
"""

import importlib

__all__ = ["surface"]


def surface(package, modules):
    """``modules`` maps a submodule to the names it gives the package (a
    submodule's own name gives the module). Returns ``__all__``,
    ``__getattr__`` and ``__dir__`` for the package's namespace."""
    where = {name: mod for mod, names in modules.items() for name in names}

    def getattr_(name):
        try:
            mod = importlib.import_module(f"{package}.{where[name]}")
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute "
                                 f"{name!r}") from None
        # A submodule named like one of its names (reap in reap.py) would
        # shadow it once imported: packages avoid that; here the module is
        # given only for a name it does not define.
        return getattr(mod, name) if hasattr(mod, name) else mod

    def dir_():
        return sorted(where)

    return sorted(where), getattr_, dir_
