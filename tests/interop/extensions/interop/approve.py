"""interop.approve: requires approval; the caller approves with a follow-up message."""

from apcore import ModuleAnnotations
from pydantic import BaseModel, Field


class ApproveInput(BaseModel):
    amount: int = Field(ge=1, le=1000)


class ApproveOutput(BaseModel):
    paid: int


class ApproveModule:
    input_schema = ApproveInput
    output_schema = ApproveOutput
    description = "Pay an amount once the caller approves"
    annotations = ModuleAnnotations(requires_approval=True)

    def execute(self, inputs: dict, context: object) -> dict:
        return {"paid": inputs["amount"]}
