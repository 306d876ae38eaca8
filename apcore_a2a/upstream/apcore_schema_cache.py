"""apcore's steps read a module's JSON Schema from a cache keyed on the class and its core schema.

The two validation steps are replaceable and get wrapped; the module-lookup step is not
and reads the registry it was built with, so our executors get :class:`LookupRegistry`.
:class:`WrappedStep` also serves the execute step of our runs (``execution/runs.py``).
"""

from __future__ import annotations

import abc
import weakref
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

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
        if name == "__apcore_source_schema__":
            return _source_schema(self._cls)
        return getattr(self._cls, name)


#: class -> (its source schema, that schema or ``None`` when no object in it has a
#: ``format`` key): apcore's format warnings note the answer on the class they are given,
#: and a view is no class, so without this every call walked the schema again.
_sources: weakref.WeakKeyDictionary[type, tuple[object, Any]] = weakref.WeakKeyDictionary()


def _source_schema(cls: type) -> Any:
    """*cls*'s ``__apcore_source_schema__`` (set by apcore's ``SchemaLoader``), or ``None``
    when nothing in it can declare a format: apcore's warnings then check nothing."""
    source = getattr(cls, "__apcore_source_schema__", None)
    if not isinstance(source, dict):
        return source
    hit = _sources.get(cls)
    if hit is not None and hit[0] is source:
        return hit[1]
    found = source if _mentions_format(source) else None
    _sources[cls] = (source, found)
    return found


def _mentions_format(schema: dict[str, Any]) -> bool:
    """Whether any object in *schema* (at any depth, in any position) has a ``format`` key:
    true wherever apcore finds a declared format, and maybe elsewhere (a property so named)."""
    pending: list[Any] = [schema]
    seen: set[int] = set()
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            if "format" in node:
                return True
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False


def _viewed(schema: Any) -> Any:
    # Only pydantic model classes rebuild their schema per call; dict-schema adapters
    # and anything else already answer cheaply and pass through untouched.
    if isinstance(schema, type) and hasattr(schema, "__pydantic_core_schema__"):
        return _SchemaView(schema)
    return schema


@dataclass(slots=True, eq=False)
class _ModuleView:
    """The module as the validation steps see it: its schema classes behind :class:`_SchemaView`."""

    _module: Any

    # What apcore's steps read of the module on every call, found at once: a name left to
    # __getattr__ is first missed, which costs an AttributeError (issue 43).
    input_schema = property(lambda self: _viewed(self._module.input_schema))
    output_schema = property(lambda self: _viewed(self._module.output_schema))
    execute = property(attrgetter("_module.execute"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


class LookupRegistry:
    """An apcore ``Registry`` whose ``get`` answers a module behind :class:`_ModuleView`;
    everything else is the registry's own. For an ``Executor`` of ours, so its
    (non-replaceable) module-lookup step reads the cached schema too."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def get(self, module_id: str, *args: Any, **kwargs: Any) -> Any:
        module = self.registry.get(module_id, *args, **kwargs)
        return None if module is None else _ModuleView(module)

    def __getattr__(self, name: str) -> Any:
        if name == "registry":  # not set yet (a copy in the making)
            raise AttributeError(name)
        return getattr(self.registry, name)


def registry_of(executor: Any) -> Any:
    """*executor*'s registry: the user's, not the :class:`LookupRegistry` in front of it."""
    registry = executor.registry
    return registry.registry if isinstance(registry, LookupRegistry) else registry


class WrappedStep(abc.ABC):
    """An apcore pipeline step that runs *inner* with ``ctx.module`` replaced by ``view()``;
    every other attribute (name, flags, requires/provides) is *inner*'s, so traces,
    dependency checks and the post-stream sub-strategy see the same step."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy in the making)
            raise AttributeError(name)
        return getattr(self.inner, name)

    # What apcore's pipeline reads of every step on every call, found at once (see
    # _ModuleView).
    name = property(attrgetter("inner.name"))
    match_modules = property(attrgetter("inner.match_modules"))
    ignore_errors = property(attrgetter("inner.ignore_errors"))
    pure = property(attrgetter("inner.pure"))
    timeout_ms = property(attrgetter("inner.timeout_ms"))

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
