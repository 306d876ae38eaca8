"""interop.echo: text in, text out (the plainest send)."""

from pydantic import BaseModel, Field


class EchoInput(BaseModel):
    text: str = Field(max_length=10_000, description="Any text")


class EchoOutput(BaseModel):
    text: str


class EchoModule:
    input_schema = EchoInput
    output_schema = EchoOutput
    description = "Echo the text back"

    def execute(self, inputs: dict, context: object) -> dict:
        return {"text": f"echo: {inputs['text']}"}
