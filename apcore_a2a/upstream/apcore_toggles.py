"""Whether apcore's toggle disabled a module, asked before a task exists."""

from __future__ import annotations

from typing import Any

from apcore.sys_modules.control import is_module_disabled


def is_disabled(executor: Any, module_id: str) -> bool:
    """Whether *executor* (an apcore ``Executor``) refuses *module_id* as disabled."""
    toggles = getattr(executor, "_toggle_state", None)
    if toggles is None:
        return bool(is_module_disabled(module_id))
    return bool(toggles.is_disabled(module_id))
