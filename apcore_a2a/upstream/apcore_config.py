"""The apcore ``Config`` an ``Executor`` or a ``Registry`` was built with.

Upstream (apcore 0.32.2): both keep the ``Config`` given to their constructor in a private
``_config`` and offer no accessor (``APCore`` has a public ``config``). The card's name and
version default to its ``project.name`` / ``project.version`` (README), so this reads it.
Deletable when apcore exposes it: ``tests/upstream/test_apcore_config.py`` fails then.
"""

from __future__ import annotations

from typing import Any


def config_of(owner: Any) -> Any:
    """The apcore ``Config`` *owner* (an Executor, Registry or APCore) holds, or ``None``."""
    public = getattr(owner, "config", None)
    return public if public is not None else getattr(owner, "_config", None)
