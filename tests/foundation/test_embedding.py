"""An app embedded in a host event loop leaves that loop as it found it."""

from __future__ import annotations

import asyncio

from apcore_a2a import async_serve
from tests._support import running_server
from tests.foundation.modules import build_registry


async def test_host_loop_default_executor_survives_app_shutdown() -> None:
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(None, lambda: 1) == 1
    before = getattr(loop, "_default_executor", None)
    async with running_server(async_serve(build_registry(), environ={})):
        pass
    assert getattr(loop, "_default_executor", None) is before
    assert await loop.run_in_executor(None, lambda: 2) == 2
    # a second app in the same loop starts and stops cleanly too
    async with running_server(async_serve(build_registry(), environ={})):
        pass
    assert await loop.run_in_executor(None, lambda: 3) == 3
