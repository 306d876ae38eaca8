"""Public names a package imports on first use (PEP 562's module ``__getattr__``): what
they pull in (the server, PyJWT and cryptography) costs nothing to a process that never
reads them (``import apcore_a2a.client``; an agent without JWT, push or card signing)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """The ``__getattr__`` of *package*: a name of *homes* is imported from its module
    there on first use and kept in *namespace* (the package's ``globals()``)."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = namespace[name] = getattr(importlib.import_module(home), name)
        return value

    return __getattr__
