"""noisy.fail: fails with a message that repeats the client's text (for the log tests)."""

from apcore import ModuleError
from pydantic import BaseModel, Field


class FailInput(BaseModel):
    text: str = Field(max_length=100_000, description="Any text")


class FailOutput(BaseModel):
    text: str


class FailModule:
    input_schema = FailInput
    output_schema = FailOutput
    description = "Always fails, quoting the input"

    async def execute(self, inputs: dict, context: object) -> dict:
        raise ModuleError(code="NOISY_FAILURE", message=f"cannot handle {inputs['text']}")
