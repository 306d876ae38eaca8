"""The apcore ``Executor`` behind an agent: given, or built for a bare registry."""

from __future__ import annotations

from typing import Any

__all__ = ["default_executor", "resolve_executor"]


def default_executor(registry: Any, *, acl: Any = None, execution_timeout: float = 300.0) -> Any:
    """The apcore ``Executor`` we build when given a bare registry.

    Approval-gated modules get the :class:`A2AApprovalHandler` (they park in
    ``input-required`` instead of running unchecked), and apcore's own per-call timeouts
    (30 s by default) are raised to ``execution_timeout`` so that one setting governs.
    Its validation steps reuse each module's JSON Schema (:func:`cache_schemas`).
    """
    from apcore import Config, Executor

    from apcore_a2a.approval import A2AApprovalHandler
    from apcore_a2a.execution.schema_cache import cache_schemas

    limit_ms = max(1, int(execution_timeout * 1000))
    config = Config(data={"executor": {"default_timeout": limit_ms, "global_timeout": limit_ms}})
    return cache_schemas(
        Executor(registry, acl=acl, config=config, approval_handler=A2AApprovalHandler())
    )


def resolve_executor(obj: Any, *, execution_timeout: float = 300.0) -> tuple[Any, Any]:
    """Return ``(registry, executor)`` for a Registry or an Executor (duck-typed)."""
    if callable(getattr(obj, "call_async", None)) and hasattr(obj, "registry"):
        return obj.registry, obj
    if callable(getattr(obj, "list", None)) and callable(getattr(obj, "get_definition", None)):
        return obj, default_executor(obj, execution_timeout=execution_timeout)
    raise TypeError(
        "Expected an apcore Registry (list, get_definition) or Executor (call_async, registry), "
        f"got {type(obj).__name__}"
    )
