"""Whether apcore would refuse a module as disabled (its toggle: ``APCore.disable()``,
``system.control.toggle_feature``).

Upstream (apcore 0.32.2): an ``Executor`` keeps the ``ToggleState`` its module-lookup step
consults in a private ``_toggle_state`` (``None``: the process-wide default state, which
the public ``is_module_disabled`` reads) and offers no accessor. The request-context
builder asks it, so a disabled skill is refused before a task exists (no failed task, no
traceback from the SDK's producer) and a follow-up before it claims its task's wait.
Deletable when apcore exposes it: ``tests/upstream/test_apcore_toggles.py`` fails then.
"""

from __future__ import annotations

from typing import Any

from apcore.sys_modules.control import is_module_disabled


def is_disabled(executor: Any, module_id: str) -> bool:
    """Whether *executor* (an apcore ``Executor``) refuses *module_id* as disabled."""
    toggles = getattr(executor, "_toggle_state", None)
    if toggles is None:
        return bool(is_module_disabled(module_id))
    return bool(toggles.is_disabled(module_id))
