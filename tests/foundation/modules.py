"""apcore modules used by the foundation tests, registered programmatically."""

from __future__ import annotations

from typing import Any

from apcore import Registry
from apcore.decorator import module
from pydantic import BaseModel, Field

from tests import _modules


class Add(_modules.Add):
    tags = ["math"]


class StatsIn(BaseModel):
    text: str = Field(description="Text to analyse")


class StatsOut(BaseModel):
    words: int
    characters: int


class Stats:
    input_schema = StatsIn
    output_schema = StatsOut
    description = "Count words and characters"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"words": len(inputs["text"].split()), "characters": len(inputs["text"])}


class RaiseIn(BaseModel):
    kind: str


class RaiseOut(BaseModel):
    ok: bool = True


class Raiser:
    """Raises the apcore error named by ``kind`` (one per row of the error table)."""

    input_schema = RaiseIn
    output_schema = RaiseOut
    description = "Raise an apcore error on purpose"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        raise make_error(inputs["kind"])


def make_error(kind: str) -> BaseException:
    import apcore.errors as e
    from apcore import ApprovalResult
    from apcore.cancel import ExecutionCancelledError

    denied = ApprovalResult(status="rejected", reason="not today")
    table: dict[str, Any] = {
        "MODULE_NOT_FOUND": lambda: e.ModuleNotFoundError("errors.raise"),
        # a module the skill calls is gone: the skill's fault, the caller's skill exists
        "NESTED_NOT_FOUND": lambda: e.ModuleNotFoundError("ghost.module"),
        "MODULE_DISABLED": lambda: e.ModuleDisabledError("errors.raise"),
        "SCHEMA_VALIDATION_ERROR": lambda: e.SchemaValidationError(
            "Input validation failed", [{"path": "/x", "keyword": "type", "message": "bad x"}]
        ),
        "GENERAL_INVALID_INPUT": lambda: e.InvalidInputError("bad input"),
        "ACL_DENIED": lambda: e.ACLDeniedError("caller", "errors.raise"),
        # a call the skill makes that the ACL refuses: the skill's fault, not the caller's
        "NESTED_DENIED": lambda: e.ACLDeniedError("errors.raise", "secret.module"),
        # a module's own ACL_DENIED naming no target: was the table's "Task not found"
        "UNNAMED_DENIED": lambda: e.ModuleError("ACL_DENIED", "no access to the ledger"),
        "APPROVAL_DENIED": lambda: e.ApprovalDeniedError(denied, "errors.raise"),
        "APPROVAL_TIMEOUT": lambda: e.ApprovalTimeoutError(
            ApprovalResult(status="timeout"), "errors.raise"
        ),
        "MODULE_TIMEOUT": lambda: e.ModuleTimeoutError("errors.raise", 100),
        "EXECUTION_CANCELLED": lambda: ExecutionCancelledError(),
        "MODULE_EXECUTE_ERROR": lambda: ValueError(
            "secret failure in /srv/app/secret/config.py line 3\n"
            'Traceback (most recent call last):\n  File "/x.py"'
        ),
        "CALL_DEPTH_EXCEEDED": lambda: e.CallDepthExceededError(9, 8, ["a"] * 9),
        "CIRCULAR_CALL": lambda: e.CircularCallError("errors.raise", ["errors.raise"] * 2),
        "CALL_FREQUENCY_EXCEEDED": lambda: e.CallFrequencyExceededError(
            "errors.raise", 4, 3, ["errors.raise"] * 4
        ),
        "CIRCUIT_BREAKER_OPEN": lambda: e.CircuitBreakerOpenError("errors.raise", None),
        # the legacy code an older apcore (or a custom breaker) still raises
        "CIRCUIT_OPEN": lambda: e.CircuitOpenError(
            "errors.raise", None, code=e.ErrorCodes.CIRCUIT_OPEN
        ),
        "TASK_LIMIT_EXCEEDED": lambda: e.TaskLimitExceededError(10),
        "GENERAL_INTERNAL_ERROR": lambda: e.InternalError("db password=hunter2 leaked"),
        "CUSTOM_QUOTA": lambda: e.ModuleError("BILLING_QUOTA", "quota exhausted"),
    }
    return table[kind]()


def build_registry(*, single: bool = False) -> Registry:
    registry = Registry()
    registry.register("math.add", Add())
    if single:
        return registry
    registry.register("text.stats", Stats())
    registry.register("errors.raise", Raiser())

    @module(id="text.shout", description="Shout a text back", registry=registry)
    def shout(text: str) -> str:
        return text.upper() + "!"

    @module(id="data.pair", description="Return a list", registry=registry)
    def pair(x: int) -> list:  # type: ignore[type-arg]
        return [x, x]

    return registry
