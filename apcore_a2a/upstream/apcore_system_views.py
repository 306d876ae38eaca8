"""apcore's read-only system modules tell a caller of the skills it may call only, and
not the error texts of other calls.

apcore 0.32.2's ``system.manifest.full``, ``system.health.summary`` and
``system.usage.summary`` answer about every registered module, and
``system.manifest.module``, ``system.health.module`` and ``system.usage.module`` about any
module id given. Served as skills, they told any caller allowed them (the public card's
anonymous callers too) the ids, schemas and call counts of the modules the agent keeps
from it everywhere else (card, extended card, "Skill not found"): the control plane
(``system.control.*``, an operator's), the system modules not served, modules not
published (no description), modules an ACL hides from it; and the server's file of each
module (``source_path``). A caller without the operator role gets the entries, counts and
totals of the modules it may see (*may_see*), no ``source_path``, no caller module it may
not see (``callers`` of ``system.usage.module``: the modules that called the one asked
about) and, about any other module, the answer about a module that does not exist
(apcore's ``ModuleNotFoundError``, raised before the call); operators read them as apcore
answers.

The health modules' errors are those of every call, whoever made it: ``system.health.summary``
(each module's ``top_error``) and ``system.health.module`` (its ``recent_errors``) answered
their ``message`` and ``ai_guidance``, a module's exception text (``card 4111-...
declined``), which the agent answers that call's own caller only as "Module execution
failed". A caller without the operator role gets each error's code, count and times, its
text replaced by :data:`HIDDEN` (:func:`without_error_texts`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from apcore import ModuleNotFoundError

ABOUT_ONE = frozenset({"system.manifest.module", "system.health.module", "system.usage.module"})
LISTS = frozenset({"system.manifest.full", "system.health.summary", "system.usage.summary"})
_VIEWS = ABOUT_ONE | LISTS
_STATUSES = ("healthy", "degraded", "error", "unknown")
HEALTH_MODULES = frozenset({"system.health.summary", "system.health.module"})
HIDDEN = "hidden: the error text of a call is shown to operators only"
_TEXT = ("message", "ai_guidance")


async def call_seen(
    call: Callable[[str, dict[str, Any], Any], Awaitable[Any]],
    module_id: str,
    inputs: dict[str, Any],
    context: Any,
    may_see: Callable[[str], bool] | None,
) -> Any:
    """``call(module_id, inputs, context)`` (apcore's ``call_async``) as seen by a caller
    who may see the modules *may_see* accepts (``None``: an operator, who sees all)."""
    if may_see is None or module_id not in _VIEWS:  # an operator; other modules
        return await call(module_id, inputs, context)
    asked = inputs.get("module_id")
    if module_id in ABOUT_ONE and isinstance(asked, str) and asked and not may_see(asked):
        raise ModuleNotFoundError(module_id=asked)
    quiet = module_id == "system.health.summary" and inputs.get("include_healthy") is False
    if quiet:  # counted over the modules seen, then left out as asked
        inputs = {**inputs, "include_healthy": True}
    value = without_error_texts(module_id, await call(module_id, inputs, context))
    entries = value.get("modules") if isinstance(value, dict) else None
    if module_id in ABOUT_ONE or not isinstance(entries, list):
        if isinstance(value, dict) and "source_path" in value:
            value["source_path"] = None
        if isinstance(value, dict) and isinstance(value.get("callers"), list):
            value["callers"] = [c for c in value["callers"] if _seen_caller(c, may_see)]
        return value
    kept = [e for e in entries if isinstance(e, dict) and may_see(str(e.get("module_id")))]
    for entry in kept:
        if "source_path" in entry:
            entry["source_path"] = None
    if "module_count" in value:
        value["module_count"] = len(kept)
    if isinstance(value.get("summary"), dict):
        counts = {s: sum(e.get("status") == s for e in kept) for s in _STATUSES}
        value["summary"].update(total_modules=len(kept), **counts)
    for total, key in (("total_calls", "call_count"), ("total_errors", "error_count")):
        if total in value:
            value[total] = sum(e.get(key) or 0 for e in kept)
    value["modules"] = [e for e in kept if not (quiet and e.get("status") == "healthy")]
    return value


def _seen_caller(entry: Any, may_see: Callable[[str], bool]) -> bool:
    """Whether a ``system.usage.module`` caller entry names no module kept from the caller
    (``caller_id``: the module that made the call, ``unknown`` for a caller's own)."""
    caller = entry.get("caller_id") if isinstance(entry, dict) else None
    return caller == "unknown" or (isinstance(caller, str) and may_see(caller))


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
