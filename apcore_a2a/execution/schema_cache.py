"""Pay for a module's JSON Schema once, not on every call.

apcore's validation steps redact inputs and outputs against the module's JSON Schema, and
ask the schema class for it on every call: ``model_json_schema()`` rebuilds it from scratch
each time (about 85 µs for a one-field pydantic model), twice per call in these two steps.
The schema of a pydantic class only changes when the class is rebuilt, so we answer the
no-argument call from a cache keyed on the class and its core schema, and let apcore's own
steps do everything else exactly as before: :func:`cache_schemas` swaps the
``input_validation`` and ``output_validation`` steps (both replaceable, by apcore's design)
for wrappers that hand the real step a view of the module whose schema classes answer from
that cache. Validation, redaction and errors stay apcore's.

apcore's module-lookup step asks once more for its early input redaction; that step is not
replaceable, so one schema build per call remains (see docs/benchmarks.md).
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["cache_schemas"]

_STEP_NAMES = ("input_validation", "output_validation")

# class -> (core schema it was built from, JSON Schema). A rebuilt class (model_rebuild)
# gets a new core schema object, which invalidates its entry.
_built: weakref.WeakKeyDictionary[type, tuple[object, dict[str, Any]]] = weakref.WeakKeyDictionary()


class _SchemaView:
    """A pydantic model class, except that ``model_json_schema()`` answers from the cache."""

    __slots__ = ("_cls",)

    def __init__(self, cls: type) -> None:
        self._cls = cls

    def model_json_schema(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        cls = self._cls
        if args or kwargs:
            schema: dict[str, Any] = cls.model_json_schema(*args, **kwargs)  # type: ignore[attr-defined]
            return schema
        core = getattr(cls, "__pydantic_core_schema__", None)
        hit = _built.get(cls)
        if hit is not None and hit[0] is core:
            return hit[1]
        schema = cls.model_json_schema()  # type: ignore[attr-defined]
        if getattr(cls, "__pydantic_complete__", False):
            _built[cls] = (core, schema)
        return schema

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cls, name)


class _ModuleView:
    """The module as the validation steps see it: its schema classes behind :class:`_SchemaView`."""

    __slots__ = ("_module",)

    def __init__(self, module: Any) -> None:
        self._module = module

    @property
    def input_schema(self) -> Any:
        return _view(getattr(self._module, "input_schema", None))

    @property
    def output_schema(self) -> Any:
        return _view(getattr(self._module, "output_schema", None))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


def _view(schema: Any) -> Any:
    # Only pydantic model classes rebuild their schema per call; dict-schema adapters and
    # anything else already answer cheaply and pass through untouched.
    if not isinstance(schema, type) or not hasattr(schema, "__pydantic_core_schema__"):
        return schema
    return _SchemaView(schema)


class WrappedStep:
    """An apcore pipeline step that runs *inner* (its subclass says how), under its identity."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        # Same identity in traces, dependency checks and the post-stream sub-strategy.
        for attr in ("name", "description", "removable", "replaceable", "match_modules",
                     "ignore_errors", "pure", "timeout_ms", "requires", "provides"):  # fmt: skip
            if hasattr(inner, attr):
                setattr(self, attr, getattr(inner, attr))


class _CachedSchemaStep(WrappedStep):
    """Runs apcore's own step with :class:`_ModuleView` in place of the module."""

    async def execute(self, ctx: Any) -> Any:
        module = ctx.module
        if module is None:
            return await self.inner.execute(ctx)
        ctx.module = _ModuleView(module)
        try:
            return await self.inner.execute(ctx)
        finally:
            ctx.module = module


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
        if step.name in _STEP_NAMES and type(step) in (
            BuiltinInputValidation,
            BuiltinOutputValidation,
        ):
            strategy.replace(step.name, _CachedSchemaStep(step))
    return executor
