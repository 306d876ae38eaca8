"""bench.stream: a long text output, one incompressible chunk after the other."""

import base64
import os
from collections.abc import AsyncIterator

from apcore import ModuleAnnotations
from pydantic import BaseModel, Field


class StreamInput(BaseModel):
    chunks: int = Field(default=256, ge=1, le=1_000_000)
    size: int = Field(default=4096, ge=4, le=1_048_576, description="characters per chunk")


class StreamOutput(BaseModel):
    model_config = {"extra": "allow"}


class Stream:
    input_schema = StreamInput
    output_schema = StreamOutput
    description = "Stream `chunks` text chunks of `size` random characters"
    annotations = ModuleAnnotations(streaming=True, readonly=True)

    def execute(self, inputs: dict, context: object) -> dict:
        return {}

    async def stream(self, inputs: dict, context: object) -> AsyncIterator[dict]:
        # Random text: PostgreSQL compresses repeated text, which would hide the bytes.
        raw = inputs.get("size", 4096) * 3 // 4
        for _ in range(inputs.get("chunks", 256)):
            yield {"kind": "text", "text": base64.b64encode(os.urandom(raw)).decode()}
