"""The apcore ``Config`` an ``Executor`` or ``Registry`` keeps in a private ``_config``."""

from __future__ import annotations

from typing import Any


def config_of(owner: Any) -> Any:
    """The apcore ``Config`` *owner* (an Executor, Registry or APCore) holds, or ``None``."""
    public = getattr(owner, "config", None)
    return public if public is not None else getattr(owner, "_config", None)
