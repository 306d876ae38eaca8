"""math.add: a class-based apcore module with Pydantic schemas (answers a dict)."""

from apcore import ModuleAnnotations, ModuleExample
from pydantic import BaseModel, Field


class AddInput(BaseModel):
    a: int = Field(description="First addend")
    b: int = Field(description="Second addend")


class AddOutput(BaseModel):
    sum: int


class AddModule:
    input_schema = AddInput
    output_schema = AddOutput
    description = "Add two integers"
    tags = ["math"]
    annotations = ModuleAnnotations(readonly=True, idempotent=True)
    examples = [ModuleExample(title="two and forty", inputs={"a": 2, "b": 40}, output={"sum": 42})]

    def execute(self, inputs: dict, context: object) -> dict:
        return {"sum": inputs["a"] + inputs["b"]}
