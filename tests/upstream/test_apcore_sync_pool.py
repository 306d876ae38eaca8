"""The apcore behaviour ``apcore_a2a/upstream/apcore_execute.py`` answers: apcore runs a
module with a plain ``def execute`` on the event loop's default executor, whoever owns the
loop. A failure here means apcore runs it elsewhere now (or takes an executor): run sync
modules its way and drop ``RunModule.pool``."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from apcore import Executor, Registry
from pydantic import BaseModel


class _Empty(BaseModel):
    pass


class _Where:
    input_schema = _Empty
    output_schema = _Empty
    description = "Say which thread ran it"

    def __init__(self) -> None:
        self.thread = ""

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        self.thread = threading.current_thread().name
        return {}


def test_a_sync_module_runs_on_the_loops_default_executor() -> None:
    module = _Where()
    registry = Registry()
    registry.register("demo.where", module)

    async def call() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(1, thread_name_prefix="host-default"))
        await Executor(registry).call_async("demo.where", {})

    asyncio.run(call())
    assert module.thread.startswith("host-default")
