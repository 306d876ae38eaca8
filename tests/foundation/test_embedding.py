"""An app embedded in a host event loop leaves that loop as it found it."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
from apcore import Registry
from apcore.decorator import module

from apcore_a2a import async_serve
from tests._support import TLS, running_server
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


async def test_sync_modules_run_on_the_agent_pool_and_the_loop_keeps_its_own() -> None:
    """Even with ``process_tuning`` on, the loop's default executor stays the host's: sync
    modules run on the agent's own ``sync_workers`` threads (before: the agent made its
    pool the loop's default, and wrote the loop's private field to undo it)."""
    loop = asyncio.get_running_loop()
    host = ThreadPoolExecutor(2, thread_name_prefix="host")
    loop.set_default_executor(host)
    registry = Registry()

    @module(id="where.thread", description="The thread a sync module runs on", registry=registry)
    def thread_name() -> str:
        return threading.current_thread().name

    def name() -> str:
        return threading.current_thread().name

    app = async_serve(registry, environ={}, process_tuning=True)
    async with running_server(app) as url, httpx.AsyncClient(base_url=url, verify=TLS) as http:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"data": {}}]}
            },
        }
        answer = (await http.post("/", json=body, headers={"A2A-Version": "1.0"})).json()
        ran_on = answer["result"]["task"]["artifacts"][0]["parts"][0]["text"]
        assert ran_on.startswith("apcore-a2a")
        assert (await loop.run_in_executor(None, name)).startswith("host")
    assert (await loop.run_in_executor(None, name)).startswith("host")
