"""text.countdown: a streaming module; each chunk becomes an A2A artifact update."""

import asyncio
from collections.abc import AsyncIterator

from apcore import ModuleAnnotations
from pydantic import BaseModel, Field


class CountdownInput(BaseModel):
    start: int = Field(default=3, ge=1, le=100, description="Number to count down from")
    delay: float = Field(default=0.2, ge=0, le=5, description="Seconds between chunks")


class CountdownOutput(BaseModel):
    remaining: int = 0
    done: bool = False


class Countdown:
    input_schema = CountdownInput
    output_schema = CountdownOutput
    description = "Count down, streaming one chunk per step"
    tags = ["text", "streaming"]
    annotations = ModuleAnnotations(streaming=True, readonly=True)

    def execute(self, inputs: dict, context: object) -> dict:
        return {"remaining": 0, "done": True}

    async def stream(self, inputs: dict, context: object) -> AsyncIterator[dict]:
        for n in range(inputs.get("start", 3), 0, -1):
            yield {"remaining": n}
            await asyncio.sleep(inputs.get("delay", 0.2))
        yield {"remaining": 0, "done": True}
