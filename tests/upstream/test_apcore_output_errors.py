"""The apcore behaviour ``apcore_a2a/upstream/apcore_output_errors.py`` reads with
``output_invalid``: apcore refuses a module's output with the very error it refuses a
caller's input with, told apart only by its message. A failure here means apcore gives
output validation an error (or code) of its own: map that instead and delete
``output_invalid``."""

from __future__ import annotations

from typing import Any

import pytest
from apcore import Executor, Registry
from pydantic import BaseModel

from apcore_a2a.upstream.apcore_output_errors import output_invalid
from apcore_a2a.upstream.apcore_schema_cache import cache_schemas


class In(BaseModel):
    n: int


class Out(BaseModel):
    said: str


class Module:
    input_schema = In
    output_schema = Out
    description = "Answers what it was given"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"not": "said"}


@pytest.mark.parametrize("cached", [False, True], ids=["apcore", "schemas-cached"])
async def test_apcore_refuses_input_and_output_with_one_error_code(cached: bool) -> None:
    registry = Registry()
    registry.register("demo.bad", Module())
    executor = cache_schemas(Executor(registry)) if cached else Executor(registry)
    with pytest.raises(Exception) as bad_input:
        await executor.call_async("demo.bad", {"n": "x"})
    with pytest.raises(Exception) as bad_output:
        await executor.call_async("demo.bad", {"n": 1})
    assert type(bad_input.value) is type(bad_output.value)
    assert bad_input.value.code == bad_output.value.code == "SCHEMA_VALIDATION_ERROR"  # type: ignore[attr-defined]
    assert not output_invalid(bad_input.value)
    assert output_invalid(bad_output.value)


async def test_a_json_schema_refuses_an_output_in_the_words_of_an_input() -> None:
    registry = Registry()
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    class Loose:
        input_schema = schema
        output_schema = {**schema, "properties": {"said": {"type": "string"}}, "required": []}
        description = "Answers a number where a string is due"

        def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
            return {"said": 1}

    registry.register("demo.loose", Loose())
    executor = Executor(registry)
    with pytest.raises(Exception) as bad_input:
        await executor.call_async("demo.loose", {"n": "x"})
    with pytest.raises(Exception) as bad_output:
        await executor.call_async("demo.loose", {"n": 1})
    said = bad_output.value.message  # type: ignore[attr-defined]
    assert said.startswith("Input validation failed")  # apcore's words for an input
    assert not output_invalid(bad_input.value)
    assert output_invalid(bad_output.value)
