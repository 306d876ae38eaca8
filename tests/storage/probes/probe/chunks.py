"""probe.chunks: a long text output, numbered chunks of a given size, a pause between."""

import asyncio
import base64
import os
from collections.abc import AsyncIterator

from apcore import ModuleAnnotations
from pydantic import BaseModel, Field


class ChunksInput(BaseModel):
    count: int = Field(ge=1, le=100_000)
    size: int = Field(default=64, ge=8, le=65_536, description="characters per chunk")
    delay: float = Field(default=0.0, ge=0, le=5, description="seconds between chunks")


class ChunksOutput(BaseModel):
    model_config = {"extra": "allow"}


class ProbeChunks:
    input_schema = ChunksInput
    output_schema = ChunksOutput
    description = "Stream `count` numbered text chunks of `size` characters"
    annotations = ModuleAnnotations(streaming=True, readonly=True)

    def execute(self, inputs: dict, context: object) -> dict:
        return {}

    async def stream(self, inputs: dict, context: object) -> AsyncIterator[dict]:
        for n in range(inputs["count"]):
            # Numbered, then random (so PostgreSQL cannot compress it away).
            body = base64.b64encode(os.urandom(inputs["size"])).decode()
            yield {"kind": "text", "text": f"{n:06d}:{body}"[: inputs["size"]]}
            await asyncio.sleep(inputs["delay"])
