"""Push deliveries of a mounted agent verify at ``examples/push_receiver.py`` (issue 34, item 2).

Mounted in Starlette or FastAPI as the README shows, without ``url=``, the agent is reached
at ``http://HOST:PORT/agent``: its card, its JWKS URL and the ``iss`` of every delivery
must all name that URL, or the documented receiver rejects each delivery ("Invalid
issuer") and the config ends ``failed``.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from apcore_a2a import async_serve
from tests._support import EXAMPLES, ROOT, TLS, ServerProcess, free_port, running_server, wait_http
from tests.foundation.modules import build_registry
from tests.push._agent import add_message


def _host(kind: str, agent: Any) -> Any:
    if kind == "starlette":
        return Starlette(routes=[Mount("/agent", app=agent)])
    from fastapi import FastAPI

    api = FastAPI()
    api.mount("/agent", agent)
    return api


def _verified(output: str) -> int:
    """Deliveries the receiver accepted: it logs ``task ID: KIND ...`` for each."""
    return sum(1 for line in output.splitlines() if re.search(r" task [0-9a-f-]+: ", line))


@pytest.mark.parametrize("kind", ["starlette", "fastapi"])
async def test_mounted_agent_deliveries_verify_at_the_example_receiver(kind: str) -> None:
    agent = async_serve(
        build_registry(), environ={}, push_notifications=True, push_allow_insecure_urls=True
    )
    async with running_server(_host(kind, agent), port=free_port()) as url:
        base = url + "/agent"
        hook_port = free_port()
        receiver = ServerProcess(
            [
                sys.executable,
                str(EXAMPLES / "push_receiver.py"),
                "--agent",
                base,
                "--port",
                str(hook_port),
            ],
            cwd=ROOT,
        )
        try:
            await asyncio.to_thread(wait_http, f"http://127.0.0.1:{hook_port}/", proc=receiver)
            message = add_message()
            message["metadata"] = {"skillId": "math.add"}
            hook = {"id": "hook", "url": f"http://127.0.0.1:{hook_port}/webhook"}
            params = {"message": message, "configuration": {"taskPushNotificationConfig": hook}}
            async with httpx.AsyncClient(timeout=30, verify=TLS) as http:
                reply = await http.post(
                    base + "/",
                    json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params},
                    headers={"A2A-Version": "1.0"},
                )
                task_id = reply.json()["result"]["task"]["id"]
                # The task, working, its artifact, completed: four deliveries, in order.
                deadline = time.monotonic() + 60
                while "COMPLETED" not in receiver.output() and "rejected" not in receiver.output():
                    assert time.monotonic() < deadline, receiver.output()
                    await asyncio.sleep(0.1)
                listed = await http.post(
                    base + "/",
                    json={
                        "jsonrpc": "2.0",
                        "id": 2,
                        "method": "ListTaskPushNotificationConfigs",
                        "params": {"taskId": task_id},
                    },
                    headers={"A2A-Version": "1.0"},
                )
        finally:
            receiver.terminate()  # the example's uvicorn.run re-raises SIGTERM: not judged
            receiver.wait(timeout=15)
    output = receiver.output()
    assert "rejected delivery" not in output, output
    assert _verified(output) == 4, output
    assert "failed" not in listed.text, listed.text
