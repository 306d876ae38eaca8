"""The apcore behaviour ``apcore_a2a/upstream/apcore_schema_cache.py`` answers: apcore's
steps ask a module's pydantic schema class for its JSON Schema on every call, three times
(module lookup, input and output validation), and pydantic builds it anew each time. A
failure here means apcore caches it now: delete that file (``cache_schemas`` then changes
nothing; tests/foundation/test_schema_cache.py has the behaviour it must keep)."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from apcore import Executor, Registry
from pydantic import BaseModel


class _Counted(BaseModel):
    builds: ClassVar[int] = 0
    text: str

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        if not args and not kwargs:
            _Counted.builds += 1
        return super().model_json_schema(*args, **kwargs)


class _Echo:
    input_schema = _Counted
    output_schema = _Counted
    description = "Echo"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return inputs


def test_apcore_builds_the_json_schema_three_times_per_call() -> None:
    registry = Registry()
    registry.register("demo.echo", _Echo())
    executor = Executor(registry)

    async def calls() -> None:
        for _ in range(5):
            await executor.call_async("demo.echo", {"text": "a"})

    asyncio.run(executor.call_async("demo.echo", {"text": "a"}))
    before = _Counted.builds
    asyncio.run(calls())
    assert (_Counted.builds - before) / 5 == 3
