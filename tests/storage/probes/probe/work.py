"""probe.work: a slow synchronous module that writes down what happens to it.

It appends ``started``, then ``canceled`` (apcore's cancel token fired) or ``finished``
to the *journal* file it is given, one line each, so a test sees from the module's own
side whether a cancel reached it, whichever replica runs it.
"""

import os
import time

from apcore.cancel import ExecutionCancelledError
from pydantic import BaseModel, Field


class WorkInput(BaseModel):
    journal: str = Field(description="File the module appends its observations to")
    seconds: float = Field(default=60.0, ge=0, le=600, description="How long to work")


class WorkOutput(BaseModel):
    worked: float


def _note(journal: str, what: str) -> None:
    with open(journal, "a", encoding="utf-8") as sink:
        sink.write(f"{what} {os.getpid()}\n")


class ProbeWork:
    input_schema = WorkInput
    output_schema = WorkOutput
    description = "Work for a while, checking apcore's cancel token; journal what happens"

    def execute(self, inputs: dict, context: object) -> dict:
        journal = inputs["journal"]
        seconds = float(inputs.get("seconds", 60.0))
        token = getattr(context, "cancel_token", None)
        _note(journal, "started")
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                if token is not None:
                    token.check()
                time.sleep(0.05)
        except ExecutionCancelledError:
            _note(journal, "canceled")
            raise
        _note(journal, "finished")
        return {"worked": seconds}
