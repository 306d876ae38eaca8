"""probe.pay: an approval-gated payment that journals every time it really runs.

Each execution appends ``paid <amount> <pid>`` to the *journal* file, so a test counts
from the module's own side how many times one approval made it run, on any replica.
"""

import os
import time

from apcore import ModuleAnnotations
from pydantic import BaseModel, Field


class PayInput(BaseModel):
    journal: str = Field(description="File the module appends each payment to")
    amount: int = Field(gt=0, description="Amount in cents")
    seconds: float = Field(default=0.0, ge=0, le=60, description="How long paying takes")


class PayOutput(BaseModel):
    paid: int


class ProbePay:
    input_schema = PayInput
    output_schema = PayOutput
    description = "Pay an amount after approval; journal every execution"
    annotations = ModuleAnnotations(requires_approval=True)

    def execute(self, inputs: dict, context: object) -> dict:
        time.sleep(float(inputs.get("seconds", 0.0)))
        with open(inputs["journal"], "a", encoding="utf-8") as sink:
            sink.write(f"paid {inputs['amount']} {os.getpid()}\n")
        return {"paid": inputs["amount"]}
