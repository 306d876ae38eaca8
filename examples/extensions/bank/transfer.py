"""bank.transfer: requires human approval; over A2A the task waits in input-required."""

from apcore import ModuleAnnotations
from pydantic import BaseModel, Field


class TransferInput(BaseModel):
    to: str = Field(description="Recipient account")
    amount: int = Field(gt=0, description="Amount in cents")


class TransferOutput(BaseModel):
    status: str
    to: str
    amount: int


class Transfer:
    input_schema = TransferInput
    output_schema = TransferOutput
    description = "Transfer money (asks for approval first)"
    tags = ["bank"]
    annotations = ModuleAnnotations(requires_approval=True, destructive=True)

    def execute(self, inputs: dict, context: object) -> dict:
        return {"status": "sent", "to": inputs["to"], "amount": inputs["amount"]}
