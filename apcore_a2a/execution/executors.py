"""The apcore ``Executor`` behind an agent (given, or built for a bare registry), and
:func:`cache_schemas`, which makes it pay for a module's JSON Schema once, not per call.

apcore's validation steps redact inputs and outputs against the module's JSON Schema and
ask the schema class for it on every call: ``model_json_schema()`` rebuilds it each time
(about 85 µs for a one-field pydantic model), twice per call. A pydantic class's schema
only changes when the class is rebuilt, so the two (replaceable) validation steps get a
view of the module whose schema classes answer from a cache keyed on the class and its
core schema; validation, redaction and errors stay apcore's. apcore's module-lookup step
asks once more and is not replaceable, so one build per call remains (docs/benchmarks.md).
"""

from __future__ import annotations

import abc
import weakref
from dataclasses import dataclass
from typing import Any

__all__ = ["WrappedStep", "cache_schemas", "default_executor", "resolve_executor"]


def default_executor(registry: Any, *, acl: Any = None, execution_timeout: float = 300.0) -> Any:
    """The apcore ``Executor`` we build when given a bare registry.

    Approval-gated modules get the :class:`A2AApprovalHandler` (they park in
    ``input-required`` instead of running unchecked), and apcore's own per-call timeouts
    (30 s by default) are raised to ``execution_timeout`` so that one setting governs.
    Its validation steps reuse each module's JSON Schema (:func:`cache_schemas`).
    """
    from apcore import Config, Executor

    from apcore_a2a.approval import A2AApprovalHandler

    limit_ms = max(1, int(execution_timeout * 1000))
    config = Config(data={"executor": {"default_timeout": limit_ms, "global_timeout": limit_ms}})
    return cache_schemas(
        Executor(registry, acl=acl, config=config, approval_handler=A2AApprovalHandler())
    )


def resolve_executor(obj: Any, *, execution_timeout: float = 300.0) -> tuple[Any, Any]:
    """Return ``(registry, executor)`` for a Registry, an Executor (duck-typed) or an
    ``APCore`` client (its executor). An apcore Executor without an approval handler gets
    ours (:func:`~apcore_a2a.execution.governance.ensure_approvals`)."""
    from apcore import APCore

    from apcore_a2a.execution.governance import ensure_approvals

    if isinstance(obj, APCore):
        obj = obj.executor
    if callable(getattr(obj, "call_async", None)) and hasattr(obj, "registry"):
        ensure_approvals(obj)
        return obj.registry, obj
    if callable(getattr(obj, "list", None)) and callable(getattr(obj, "get_definition", None)):
        return obj, default_executor(obj, execution_timeout=execution_timeout)
    raise TypeError(
        "Expected an apcore Registry (list, get_definition) or Executor (call_async, registry), "
        f"got {type(obj).__name__}"
    )


# class -> (core schema it was built from, JSON Schema). A rebuilt class (model_rebuild)
# gets a new core schema object, which invalidates its entry.
_built: weakref.WeakKeyDictionary[type, tuple[object, dict[str, Any]]] = weakref.WeakKeyDictionary()


@dataclass(slots=True, eq=False)
class _SchemaView:
    """A pydantic model class, except that ``model_json_schema()`` answers from the cache."""

    _cls: type

    def model_json_schema(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        cls: Any = self._cls
        if args or kwargs:
            return dict(cls.model_json_schema(*args, **kwargs))
        core = getattr(cls, "__pydantic_core_schema__", None)
        hit = _built.get(cls)
        if hit is not None and hit[0] is core:
            return hit[1]
        schema: dict[str, Any] = cls.model_json_schema()
        if getattr(cls, "__pydantic_complete__", False):
            _built[cls] = (core, schema)
        return schema

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cls, name)


def _view(schema: Any) -> Any:
    # Only pydantic model classes rebuild their schema per call; dict-schema adapters and
    # anything else already answer cheaply and pass through untouched.
    if not isinstance(schema, type) or not hasattr(schema, "__pydantic_core_schema__"):
        return schema
    return _SchemaView(schema)


@dataclass(slots=True, eq=False)
class _ModuleView:
    """The module as the validation steps see it: its schema classes behind :class:`_SchemaView`."""

    _module: Any

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        return _view(value) if name in ("input_schema", "output_schema") else value


#: What a wrapped step keeps of the step it wraps.
_STEP_ATTRS = (
    "name",
    "description",
    "removable",
    "replaceable",
    "match_modules",
    "ignore_errors",
    "pure",
    "timeout_ms",
    "requires",
    "provides",
)


class WrappedStep(abc.ABC):
    """An apcore pipeline step that runs *inner* with ``ctx.module`` replaced by ``view()``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        # Same identity in traces, dependency checks and the post-stream sub-strategy.
        for attr in _STEP_ATTRS:
            if hasattr(inner, attr):
                setattr(self, attr, getattr(inner, attr))

    @abc.abstractmethod
    def view(self, module: Any) -> Any:
        """The module the inner step should see."""

    async def execute(self, ctx: Any) -> Any:
        module = ctx.module
        if module is None:
            return await self.inner.execute(ctx)
        ctx.module = self.view(module)
        try:
            return await self.inner.execute(ctx)
        finally:
            ctx.module = module


class _CachedSchemaStep(WrappedStep):
    def view(self, module: Any) -> Any:
        return _ModuleView(module)


def cache_schemas(executor: Any) -> Any:
    """Make *executor*'s validation steps reuse each module's JSON Schema; returns it.

    Applied to the executors apcore-a2a builds for a bare registry. An ``Executor`` of your
    own can opt in the same way::

        from apcore_a2a import cache_schemas
        executor = cache_schemas(Executor(registry, acl=acl))

    Only apcore's own two step classes are wrapped: a step of yours (a subclass included)
    may expect the real module on the context, and is left alone; so is a step already
    wrapped, so a second call changes nothing.
    """
    from apcore.builtin_steps import BuiltinInputValidation, BuiltinOutputValidation

    strategy = executor.current_strategy
    for step in list(strategy.steps):
        if type(step) in (BuiltinInputValidation, BuiltinOutputValidation):
            strategy.replace(step.name, _CachedSchemaStep(step))
    return executor
