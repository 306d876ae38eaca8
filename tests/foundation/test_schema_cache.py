"""cache_schemas: apcore's validation steps answer from a per-class JSON Schema cache.

Every observable outcome (redacted inputs and outputs, validation errors, approval, streamed
chunks) must be the same as with apcore's Executor as shipped; only the number of schema
builds per call drops (3 -> 1 for an ``Executor`` of the user's passed through
``cache_schemas``; 3 -> 0 for the executor we build over a bare registry, whose module-lookup
step reads the registry through ``LookupRegistry``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest
from apcore import Executor, Middleware, Registry
from apcore.errors import SchemaValidationError
from pydantic import BaseModel, Field

from apcore_a2a import cache_schemas
from apcore_a2a.execution.governance import default_executor, resolve_executor


class _Counted(BaseModel):
    """Counts the no-argument ``model_json_schema()`` calls (the ones apcore makes)."""

    builds: ClassVar[int] = 0

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        if not args and not kwargs:
            cls.builds += 1
        return super().model_json_schema(*args, **kwargs)


class LoginIn(_Counted):
    user: str
    password: str = Field(json_schema_extra={"x-sensitive": True})
    count: int = 1


class LoginOut(_Counted):
    token: str = Field(json_schema_extra={"x-sensitive": True})
    user: str


class Login:
    input_schema = LoginIn
    output_schema = LoginOut
    description = "Log in"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        if inputs["user"] == "broken":
            return {"token": 42, "user": "broken"}  # not a str: output validation fails
        return {"token": "tok-" + inputs["password"], "user": inputs["user"]}


class StreamLogin(Login):
    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        yield {"user": inputs["user"]}
        yield {"token": "tok-" + inputs["password"]}


class DictSchema:
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }
    output_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    description = "dict schemas"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"n": inputs["n"] + 1}


class Capture(Middleware):
    """Records what apcore hands middleware: the redacted inputs and output."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[Any, Any]] = []

    def after(
        self, module_id: str, inputs: dict[str, Any], output: dict[str, Any], context: Any
    ) -> None:
        self.seen.append((context.redacted_inputs, context.redacted_output))


def _registry() -> Registry:
    registry = Registry()
    registry.register("demo.login", Login())
    registry.register("demo.stream_login", StreamLogin())
    registry.register("demo.dict", DictSchema())
    return registry


def _executor(cached: bool | str) -> tuple[Executor, Capture]:
    """apcore's as shipped (False), through ``cache_schemas`` (True), or ours ("ours")."""
    executor = default_executor(_registry()) if cached == "ours" else Executor(_registry())
    capture = Capture()
    executor.use(capture)
    return (cache_schemas(executor) if cached is True else executor), capture


async def _outcome(cached: bool | str, module_id: str, inputs: dict[str, Any]) -> dict[str, Any]:
    executor, capture = _executor(cached)
    try:
        result: Any = await executor.call_async(module_id, inputs)
        error = None
    except SchemaValidationError as exc:
        result, error = None, (type(exc).__name__, exc.code, exc.details)
    return {"result": result, "error": error, "seen": capture.seen}


CASES = [
    ("demo.login", {"user": "ann", "password": "s3cret"}),
    ("demo.login", {"user": "ann", "password": "s3cret", "count": "2"}),  # strict: no coercion
    ("demo.login", {"user": "ann"}),  # missing field
    ("demo.login", {"user": "broken", "password": "x"}),  # bad output
    ("demo.dict", {"n": 1}),
    ("demo.dict", {"n": "one"}),
]


@pytest.mark.parametrize(("module_id", "inputs"), CASES)
def test_same_outcome_with_and_without(module_id: str, inputs: dict[str, Any]) -> None:
    shipped = asyncio.run(_outcome(False, module_id, inputs))
    cached = asyncio.run(_outcome(True, module_id, inputs))
    ours = asyncio.run(_outcome("ours", module_id, inputs))
    assert cached == shipped == ours


@pytest.mark.parametrize("cached", [True, "ours"])
def test_secrets_are_redacted_on_the_cached_path(cached: bool | str) -> None:
    out = asyncio.run(_outcome(cached, "demo.login", {"user": "ann", "password": "s3cret"}))
    assert out["result"] == {"token": "tok-s3cret", "user": "ann"}
    [(redacted_in, redacted_out)] = out["seen"]
    assert redacted_in["password"] != "s3cret" and redacted_in["user"] == "ann"
    assert redacted_out["token"] != "tok-s3cret" and redacted_out["user"] == "ann"


def test_streamed_chunks_and_redaction_match() -> None:
    async def run(cached: bool | str) -> tuple[list[Any], list[Any]]:
        executor, capture = _executor(cached)
        chunks = [
            c async for c in executor.stream("demo.stream_login", {"user": "a", "password": "p"})
        ]
        return chunks, capture.seen

    shipped, cached = asyncio.run(run(False)), asyncio.run(run(True))
    assert cached == shipped == asyncio.run(run("ours"))
    assert cached[1][0][1]["token"] != "tok-p"


def test_one_schema_build_per_call_instead_of_three() -> None:
    async def builds_per_call(cached: bool | str) -> float:
        executor, _ = _executor(cached)
        await executor.call_async("demo.login", {"user": "a", "password": "p"})  # fills the cache
        before = LoginIn.builds + LoginOut.builds
        for _ in range(10):
            await executor.call_async("demo.login", {"user": "a", "password": "p"})
        return (LoginIn.builds + LoginOut.builds - before) / 10

    assert asyncio.run(builds_per_call(False)) == 3
    # The third build is apcore's module-lookup step (early redaction), not replaceable.
    assert asyncio.run(builds_per_call(True)) == 1
    # Ours: that step reads its module through the registry view, so none is left.
    assert asyncio.run(builds_per_call("ours")) == 0


def test_our_executor_answers_with_the_users_registry() -> None:
    registry = _registry()
    executor = default_executor(registry)
    assert resolve_executor(executor) == (registry, executor)
    assert resolve_executor(registry)[0] is registry


def test_a_rebuilt_class_gets_a_fresh_schema() -> None:
    class Note(BaseModel):
        text: str

    class NoteModule:
        input_schema = Note
        output_schema = Note
        description = "note"

        async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
            return inputs

    registry = Registry()
    registry.register("demo.note", NoteModule())
    executor = cache_schemas(Executor(registry))
    capture = Capture()
    executor.use(capture)
    asyncio.run(executor.call_async("demo.note", {"text": "a"}))
    Note.model_fields["text"].json_schema_extra = {"x-sensitive": True}
    Note.model_rebuild(force=True)
    asyncio.run(executor.call_async("demo.note", {"text": "b"}))
    assert capture.seen[0] == ({"text": "a"}, {"text": "a"})
    assert capture.seen[1][0]["text"] != "b" and capture.seen[1][1]["text"] != "b"


def test_built_executors_cache_and_own_steps_are_left_alone() -> None:
    from apcore.builtin_steps import BuiltinInputValidation

    registry = Registry()
    registry.register("demo.login", Login())
    names = [type(s).__name__ for s in default_executor(registry).current_strategy.steps]
    assert names.count("_CachedSchemaStep") == 2

    class Mine(BuiltinInputValidation):
        pass

    executor = Executor(registry)
    executor.current_strategy.replace("input_validation", Mine())
    cache_schemas(executor)
    steps = {s.name: type(s).__name__ for s in executor.current_strategy.steps}
    # A step class of the user's may expect the real module on the context: left alone.
    assert steps["input_validation"] == "Mine"
    assert steps["output_validation"] == "_CachedSchemaStep"
    cache_schemas(executor)  # a second call wraps nothing twice
    assert [type(s).__name__ for s in executor.current_strategy.steps].count(
        "_CachedSchemaStep"
    ) == 1


class _Counting(dict[str, Any]):
    """A source schema that counts how often it is asked whether it holds a ``format``."""

    asked = 0

    def __contains__(self, key: object) -> bool:
        if key == "format":
            _Counting.asked += 1
        return super().__contains__(key)


def _loaded(schema: dict[str, Any], name: str) -> type[BaseModel]:
    """A model as apcore's ``SchemaLoader`` makes it from JSON Schema (YAML bindings)."""
    from apcore import Config
    from apcore.schema.loader import SchemaLoader

    model = SchemaLoader(Config()).generate_model(schema, name)
    model.__apcore_source_schema__ = _Counting(schema)  # type: ignore[attr-defined]
    return model


def test_whether_a_loaded_schema_declares_a_format_is_found_once_per_class() -> None:
    """apcore notes on a loaded model's class whether its schema declares any ``format``
    (so a schema without one costs one attribute read a call); a view of the class is no
    class, so it is told here, once."""
    plain = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    class Loaded:
        input_schema = _loaded(plain, "LoadedIn")
        output_schema = _loaded(plain, "LoadedOut")
        description = "loaded"

        async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
            return inputs

    async def calls(executor: Any, n: int) -> None:
        for _ in range(n):
            await executor.call_async("demo.loaded", {"text": "a"})

    for ours in (False, True):
        registry = Registry()
        registry.register("demo.loaded", Loaded())
        executor = default_executor(registry) if ours else Executor(registry)
        asyncio.run(calls(executor, 1))
        before = _Counting.asked
        asyncio.run(calls(executor, 10))
        assert _Counting.asked == before, "asked again at each call"


def test_format_warnings_of_a_loaded_schema_are_apcores(caplog: pytest.LogCaptureFixture) -> None:
    schema = {
        "type": "object",
        "properties": {"mail": {"type": "string", "format": "email"}},
        "required": ["mail"],
    }

    class Mail:
        input_schema = _loaded(schema, "MailIn")
        output_schema = _loaded(schema, "MailOut")
        description = "mail"

        async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
            return inputs

    def warned(ours: bool) -> list[str]:
        registry = Registry()
        registry.register("demo.mail", Mail())
        executor = default_executor(registry) if ours else Executor(registry)
        caplog.clear()
        with caplog.at_level("WARNING"):
            for _ in range(2):
                asyncio.run(executor.call_async("demo.mail", {"mail": "not an address"}))
        return [r.getMessage() for r in caplog.records if "format" in r.getMessage()]

    shipped = warned(False)
    assert len(shipped) == 4  # input and output, each call
    assert warned(True) == shipped
