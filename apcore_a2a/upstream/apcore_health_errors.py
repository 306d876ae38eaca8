"""The text of other calls' errors in apcore's health modules is for operators only.

apcore 0.32.2's ``system.health.summary`` (each module's ``top_error``) and
``system.health.module`` (its ``recent_errors``) answer the ``message`` and
``ai_guidance`` of the recent errors of every call, whoever made it: a module's exception
text (``card 4111-... declined``), which the agent answers that call's own caller only as
"Module execution failed". Served as skills, they let any caller allowed to call them (the
public card's anonymous callers too) read what other callers sent. A caller with the
operator role reads them as apcore answers them (as it reads ``/health`` details); anyone
else gets each error's code, count and times, its text replaced by :data:`HIDDEN`.
"""

from __future__ import annotations

from typing import Any

HEALTH_MODULES = frozenset({"system.health.summary", "system.health.module"})
HIDDEN = "hidden: the error text of a call is shown to operators only"
_TEXT = ("message", "ai_guidance")


def without_error_texts(module_id: str, value: Any) -> Any:
    """*value*, the output of *module_id*, with its error texts hidden if it is one of
    apcore's health modules (for a caller without the operator role)."""
    if module_id not in HEALTH_MODULES or not isinstance(value, dict):
        return value
    modules = value.get("modules")
    errors = [m.get("top_error") for m in modules if isinstance(m, dict)] if modules else []
    errors += value.get("recent_errors") or []
    for error in errors:
        if isinstance(error, dict):
            error.update({key: HIDDEN for key in _TEXT if error.get(key) is not None})
    return value
