"""The backends by name: ``register_backend(name, factory)`` fills one table, ``make_backend``
looks a name up in it. Each backend is one module of this package that registers itself when
the package is imported (engines/__init__.py names them); a new backend is one more file."""
from __future__ import annotations

from typing import Callable, Dict, List

__all__ = ["register_backend", "make_backend", "backend_names", "BACKENDS"]

#: name -> factory(model, **kw) returning a DmaRuntime
BACKENDS: Dict[str, Callable] = {}
_LISTED: List[str] = []


def register_backend(name: str, factory: Callable, listed: bool = True) -> None:
    """Make ``make_backend(name, model, **kw)`` call ``factory(model, **kw)``. ``listed``: the
    name is one the command line and the error message offer (an alias or a backend made only
    by tests and benchmarks is not)."""
    if name in BACKENDS and BACKENDS[name] is not factory:
        raise ValueError(f"backend {name!r} is registered twice")
    BACKENDS[name] = factory
    if listed and name not in _LISTED:
        _LISTED.append(name)


def backend_names() -> List[str]:
    """The listed backends' names, in the order they registered."""
    return list(_LISTED)


def make_backend(name: str, model, **kw):
    """"golden" | "rtl" | "board" (keyword arguments go to the backend)."""
    factory = BACKENDS.get(name)
    if factory is None:
        names = backend_names()
        raise ValueError(f"backend must be {', '.join(names[:-1])} or {names[-1]}, got {name!r}")
    return factory(model, **kw)
