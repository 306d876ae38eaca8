"""What an apcore ``Executor`` or ``Registry`` was built with and keeps privately.

apcore 0.32.2 gives no accessor for the ``Config`` an ``Executor`` or ``Registry`` holds
(``_config``: the card's default name and version) nor for the ``ToggleState`` of an
``Executor``'s module lookup (``_toggle_state``: the request-context builder refuses a
disabled module before a task exists). Each is read here until apcore exposes it.
"""

from __future__ import annotations

from typing import Any

from apcore.sys_modules.control import is_module_disabled


def config_of(owner: Any) -> Any:
    """The apcore ``Config`` *owner* (an Executor, Registry or APCore) holds, or ``None``."""
    public = getattr(owner, "config", None)
    return public if public is not None else getattr(owner, "_config", None)


def is_disabled(executor: Any, module_id: str) -> bool:
    """Whether *executor* (an apcore ``Executor``) refuses *module_id* as disabled."""
    toggles = getattr(executor, "_toggle_state", None)
    if toggles is None:
        return bool(is_module_disabled(module_id))
    return bool(toggles.is_disabled(module_id))
