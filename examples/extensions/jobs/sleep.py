"""jobs.sleep: a slow synchronous module, for trying cancellation and timeouts."""

import time

from pydantic import BaseModel, Field


class SleepInput(BaseModel):
    seconds: float = Field(default=2.0, ge=0, le=600, description="How long to work")


class SleepOutput(BaseModel):
    slept: float


class SleepJob:
    input_schema = SleepInput
    output_schema = SleepOutput
    description = "Work for a while (sleeps), checking for cancellation"
    tags = ["jobs"]

    def execute(self, inputs: dict, context: object) -> dict:
        seconds = float(inputs.get("seconds", 2.0))
        deadline = time.monotonic() + seconds
        token = getattr(context, "cancel_token", None)
        while time.monotonic() < deadline:
            if token is not None:
                token.check()
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        return {"slept": seconds}
