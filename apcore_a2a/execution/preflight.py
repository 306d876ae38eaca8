"""Cheap checks before a task exists: input schema and ACL.

apcore validates again when it runs the module; checking here first means a request with
bad input, or from a caller the ACL denies, is answered with a JSON-RPC error and leaves
no failed task behind. ``Executor.validate()`` would do both but costs about as much as a
whole call, so this uses the module's own input model and the ACL directly (a few
microseconds).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from a2a.types import Message
from a2a.utils.errors import A2AError, InvalidParamsError, TaskNotFoundError

from apcore_a2a.adapters.errors import sanitize
from apcore_a2a.adapters.parts import input_from_parts
from apcore_a2a.adapters.skills import SkillSpec
from apcore_a2a.execution.access import acl_of, visible_modules

__all__ = ["Preflight"]

logger = logging.getLogger("apcore_a2a.acl")


def _pointer(loc: Any) -> str:
    return "/" + "/".join(str(p) for p in loc) if loc else "/"


class Preflight:
    """Validate module input and ACL access for a resolved skill."""

    def __init__(self, registry: Any, executor: Any) -> None:
        self._registry = registry
        self._executor = executor

    def check_input(self, module_id: str, inputs: dict[str, Any]) -> None:
        module = self._registry.get(module_id)
        model = getattr(module, "input_schema", None)
        validate_json = getattr(model, "model_validate_json", None)
        try:
            if callable(validate_json):
                validate_json(json.dumps(inputs, default=str), strict=True)
            elif model is not None and callable(getattr(model, "model_validate", None)):
                model.model_validate(inputs, strict=True)
        except Exception as exc:
            errors = _errors_of(exc)
            summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5])
            raise InvalidParamsError(
                message=f"Input does not match the skill's schema: {summary}"[:500],
                data={
                    "type": "SchemaValidationError",
                    "apcoreCode": "SCHEMA_VALIDATION_ERROR",
                    "errors": errors,
                },
            ) from None

    def accepts(self, spec: SkillSpec, message: Message) -> bool:
        """Whether *message*, converted for *spec*, is valid input for it (no side effects)."""
        try:
            inputs = input_from_parts(message.parts, spec.input_facts)
            self.check_input(spec.module_id, inputs)
        except A2AError:
            return False
        # Models usually ignore unknown keys; for routing, a key the schema does not name
        # means the message is for another skill.
        schema = spec.input_facts.schema
        named = schema.get("properties") or {}
        return schema.get("additionalProperties") is True or set(inputs) <= set(named)

    def visible(self, module_ids: Iterable[str], identity: Any) -> list[str]:
        """The ids of *module_ids* the ACL lets *identity* call, sorted."""
        return sorted(visible_modules(self._executor, identity, module_ids))

    def may_call(self, module_id: str, identity: Any) -> bool:
        """Whether the ACL lets *identity* call *module_id* (a denial is logged)."""
        if self.visible((module_id,), identity):
            return True
        who = getattr(identity, "id", None) or "anonymous"
        logger.warning(
            "ACL denied %s -> %s; answered as skill not found", sanitize(str(who), 200), module_id
        )
        return False

    def check_access(self, module_id: str, identity: Any) -> None:
        acl = acl_of(self._executor)
        if acl is None:
            return
        from apcore import Context

        decision = acl.check_access(None, module_id, Context.create(identity=identity))
        if getattr(decision, "access", "allow") == "deny":
            who = getattr(identity, "id", None) or "anonymous"
            logger.warning(
                "ACL denied %s -> %s (%s); answered as task not found",
                sanitize(str(who), 200),
                module_id,
                getattr(decision, "reason", "denied"),
            )
            raise TaskNotFoundError(message="Task not found")


def _errors_of(exc: Exception) -> list[dict[str, str]]:
    raw = getattr(exc, "errors", None)
    out: list[dict[str, str]] = []
    if callable(raw):
        try:
            for item in raw():
                out.append(
                    {
                        "field": _pointer(item.get("loc")),
                        "message": sanitize(item.get("msg", ""), 200),
                    }
                )
        except Exception:
            out = []
    if not out:
        out.append({"field": "/", "message": sanitize(str(exc), 200)})
    return out
