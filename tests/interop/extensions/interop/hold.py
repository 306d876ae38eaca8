"""interop.hold: runs until a second call releases its key (``{"key": K, "release": true}``).

It makes "still running" deterministic for cancel, resubscribe and push tests driven by a
peer in another process: the peer starts a held task, does what it needs while the task
runs, then releases it with another message.
"""

import asyncio

from pydantic import BaseModel, Field

_RELEASED: dict[str, asyncio.Event] = {}


def _event(key: str) -> asyncio.Event:
    return _RELEASED.setdefault(key, asyncio.Event())


class HoldInput(BaseModel):
    key: str = Field(min_length=1, max_length=200)
    release: bool = False


class HoldOutput(BaseModel):
    key: str
    released: bool


class HoldModule:
    input_schema = HoldInput
    output_schema = HoldOutput
    description = "Wait until another message releases the key"

    async def execute(self, inputs: dict, context: object) -> dict:
        event = _event(inputs["key"])
        if inputs.get("release"):
            event.set()
            return {"key": inputs["key"], "released": True}
        await asyncio.wait_for(event.wait(), timeout=60)
        return {"key": inputs["key"], "released": False}
