"""Modules that do not stop when canceled: the shutdown tests' worst case.

Each runs until the file at *path* exists (at most 120 s, so a test that fails leaves no
process running for long) and ignores every request to stop: the sync one sits in its
thread, the async one swallows ``CancelledError`` and goes on.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from apcore import Registry
from pydantic import BaseModel, Field

#: The longest a stubborn module runs (its gate never appearing).
LONGEST = 120.0


class GateIn(BaseModel):
    path: str = Field(description="File whose appearance lets the module finish")


class GateOut(BaseModel):
    released: bool


class StuckSync:
    """A plain ``def execute`` that nothing can interrupt."""

    input_schema = GateIn
    output_schema = GateOut
    description = "Block a thread until a file exists"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        gate = Path(inputs["path"])
        end = time.monotonic() + LONGEST
        while not gate.exists() and time.monotonic() < end:
            time.sleep(0.02)
        return {"released": gate.exists()}


class StuckAsync:
    """An ``async def execute`` that swallows cancellation."""

    input_schema = GateIn
    output_schema = GateOut
    description = "Ignore cancellation until a file exists"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        gate = Path(inputs["path"])
        end = time.monotonic() + LONGEST
        while not gate.exists() and time.monotonic() < end:
            try:
                await asyncio.sleep(0.02)
            except asyncio.CancelledError:
                continue  # the point of this module: it does not stop
        return {"released": gate.exists()}


def build_registry() -> Registry:
    """``stuck.sync`` and ``stuck.async``."""
    registry = Registry()
    registry.register("stuck.sync", StuckSync())
    registry.register("stuck.async", StuckAsync())
    return registry
