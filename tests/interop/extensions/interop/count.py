"""interop.count: a streaming module, one chunk per step."""

from apcore import ModuleAnnotations
from pydantic import BaseModel, Field


class CountInput(BaseModel):
    start: int = Field(default=3, ge=1, le=10)


class CountOutput(BaseModel):
    remaining: int = 0


class CountModule:
    input_schema = CountInput
    output_schema = CountOutput
    description = "Count down, one streamed chunk per step"
    annotations = ModuleAnnotations(streaming=True)

    def execute(self, inputs: dict, context: object) -> dict:
        return {"remaining": 0}

    async def stream(self, inputs: dict, context: object):
        for n in range(inputs.get("start", 3), -1, -1):
            yield {"remaining": n}
