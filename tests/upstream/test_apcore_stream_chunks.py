"""The apcore behaviour ``apcore_a2a/upstream/apcore_output_errors.py`` corrects with
``raise_module_fault``: apcore's stream refuses a module's chunk that is no object with the
error (and code) it refuses a caller's input with, told apart only by a detail. A failure
here means apcore gives a bad chunk an error (or code) of the module's own: map that
instead and delete ``raise_module_fault``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from apcore import Executor, Registry
from apcore.errors import InvalidInputError
from pydantic import BaseModel

from apcore_a2a.upstream.apcore_output_errors import raise_module_fault


class In(BaseModel):
    n: int


class Out(BaseModel):
    said: str = ""


class Module:
    input_schema = In
    output_schema = Out
    description = "Streams a string where an object belongs"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {}

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[Any]:
        yield "said"


async def _raised(executor: Executor, inputs: dict[str, Any]) -> Exception:
    with pytest.raises(Exception) as raised:
        async for _chunk in executor.stream("demo.chunks", inputs):
            pass
    return raised.value  # type: ignore[return-value]


async def test_apcore_refuses_a_modules_chunk_as_it_refuses_a_callers_input() -> None:
    registry = Registry()
    registry.register("demo.chunks", Module())
    executor = Executor(registry)
    bad_chunk = await _raised(executor, {"n": 1})
    assert type(bad_chunk) is InvalidInputError
    assert bad_chunk.code == "GENERAL_INVALID_INPUT"
    assert bad_chunk.details["code"] == "STREAM_CHUNK_NOT_OBJECT"
    with pytest.raises(Exception) as fault:
        raise_module_fault(bad_chunk, "demo.chunks")
    assert fault.value.code == "MODULE_EXECUTE_ERROR"  # type: ignore[attr-defined]
    assert fault.value.__cause__ is bad_chunk
    # A module's own refusal of the caller's input is left alone.
    assert raise_module_fault(InvalidInputError("bad n"), "demo.chunks") is None
