"""A small apcore registry served by our own server (``A2AServerFactory``)."""

from __future__ import annotations

import asyncio
from typing import Any

from apcore import Registry
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


def build_registry() -> Registry:
    registry = Registry()
    registry.register("demo.echo", Echo())
    registry.register("demo.add", Add())
    registry.register("demo.slow", SlowModule())
    registry.register("demo.fail", FailModule())
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
