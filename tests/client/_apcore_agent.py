"""A small apcore registry served by our own server (``A2AServerFactory``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from apcore import ModuleAnnotations, Registry
from pydantic import BaseModel

from tests._modules import Add, Echo


class SlowIn(BaseModel):
    seconds: float = 30.0


class SlowOut(BaseModel):
    done: bool


class SlowModule:
    input_schema = SlowIn
    output_schema = SlowOut
    description = "Sleep (until canceled)"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        await asyncio.sleep(inputs["seconds"])
        return {"done": True}


class FailIn(BaseModel):
    reason: str = "kaboom"


class FailModule:
    input_schema = FailIn
    output_schema = SlowOut
    description = "Always fails"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        raise RuntimeError(inputs["reason"])


class GateIn(BaseModel):
    gate: str
    fail: bool = False


class StepOut(BaseModel):
    step: int


#: Gates by name, made by the tests that run ``demo.gated`` (``{"gate": name}``).
GATES: dict[str, asyncio.Event] = {}


class GatedStream:
    """Streams step 1, waits for the test's gate, then streams steps 2 and 3 (or fails)."""

    input_schema = GateIn
    output_schema = StepOut
    description = "Stream a step, wait for the gate, stream the rest"
    annotations = ModuleAnnotations(streaming=True)

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"step": 3}

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        yield {"step": 1}
        await GATES[inputs["gate"]].wait()
        if inputs.get("fail"):
            raise RuntimeError("the gate said fail")
        yield {"step": 2}
        yield {"step": 3}


def build_registry() -> Registry:
    registry = Registry()
    registry.register("demo.echo", Echo())
    registry.register("demo.add", Add())
    registry.register("demo.slow", SlowModule())
    registry.register("demo.fail", FailModule())
    registry.register("demo.gated", GatedStream())
    return registry


def build_our_app(port: int | None = None, **settings: Any) -> Any:
    """Our server for the registry above; returns the Starlette app."""
    from apcore_a2a import A2AServerFactory

    overrides: dict[str, Any] = {"push_notifications": True, "push_allow_insecure_urls": True}
    if port is not None:
        overrides["port"] = port
    overrides.update(settings)
    app, _card = A2AServerFactory(build_registry(), **overrides).create()
    return app
