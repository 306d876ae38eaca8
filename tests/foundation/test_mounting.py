"""Mounted as the README shows, in Starlette and in FastAPI, nothing is lost.

``Mount("/agent", app=async_serve(registry))`` in a host that does not run the agent's
lifespan: background work starts on the first request (push deliveries are sent), the
card names the mount URL, the command-line client works against it, and every check of
the request path holds there as at the root. The documented lifespan wiring stops it
cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from apcore_a2a import async_serve
from tests._support import TLS, free_port, run_python, running_server
from tests.foundation.modules import build_registry
from tests.push._agent import add_message, receiver

MOUNT = "/agent"


def _host(kind: str, agent: Any, **host: Any) -> Any:
    if kind == "starlette":
        return Starlette(routes=[Mount(MOUNT, app=agent)], **host)
    from fastapi import FastAPI

    api = FastAPI(**host)
    api.mount(MOUNT, agent)
    return api


@contextlib.asynccontextmanager
async def _mounted(kind: str, **settings: Any) -> AsyncIterator[tuple[str, Any]]:
    agent = async_serve(build_registry(), environ={}, **settings)
    port = free_port()
    async with running_server(_host(kind, agent), port=port) as url:
        yield url + MOUNT, agent


@pytest.mark.parametrize("kind", ["starlette", "fastapi"])
async def test_mounted_without_lifespan_serves_pushes_and_names_its_mount(kind: str) -> None:
    async with (
        receiver() as hooks,
        _mounted(kind, push_notifications=True, push_allow_insecure_urls=True) as (base, agent),
        httpx.AsyncClient(verify=TLS) as http,
    ):
        card = (await http.get(base + "/.well-known/agent-card.json")).json()
        urls = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
        assert urls["JSONRPC"].rstrip("/") == base
        assert urls["HTTP+JSON"] == base
        jwks = next(
            e["params"]["jwksUrl"]
            for e in card["capabilities"]["extensions"]
            if "jwksUrl" in e.get("params", {})
        )
        assert jwks == base + "/.well-known/jwks.json"
        assert (await http.get(jwks)).status_code == 200

        message = add_message()
        message["metadata"] = {"skillId": "math.add"}
        params = {
            "message": message,
            "configuration": {"taskPushNotificationConfig": {"url": hooks.url("/hook")}},
        }
        reply = await http.post(
            base + "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params},
            headers={"A2A-Version": "1.0"},
        )
        assert reply.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        await hooks.wait_for(lambda: len(hooks.accepted("/hook")) >= 3)
        assert agent.state.a2a.started_at > 0


@pytest.mark.parametrize("kind", ["starlette", "fastapi"])
async def test_the_command_line_client_calls_the_mount_url(kind: str) -> None:
    async with _mounted(kind) as (base, _agent):
        done = await asyncio.to_thread(
            run_python,
            [
                *(sys.executable, "-m", "apcore_a2a", "call", base, "--skill", "math.add"),
                *("--data", json.dumps({"a": 2, "b": 40})),
            ],
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert '"sum": 42' in done.stdout.replace('"sum":42', '"sum": 42')


async def test_the_documented_lifespan_wiring_starts_and_stops_it() -> None:
    agent = async_serve(build_registry(), environ={})
    host = Starlette(
        routes=[Mount(MOUNT, app=agent)],
        lifespan=lambda _host: agent.router.lifespan_context(agent),
    )
    state = agent.state.a2a
    async with running_server(host) as url, httpx.AsyncClient(verify=TLS) as http:
        assert state.started_at > 0  # started by the host's lifespan, before any request
        health = await http.get(url + MOUNT + "/health")
        assert health.json() == {"status": "healthy"}
    lifecycle_closed = state.ops.shutdown_deadline is not None
    assert lifecycle_closed  # the agent drained on the host's shutdown


@pytest.mark.parametrize("kind", ["starlette", "fastapi"])
async def test_request_checks_hold_under_the_mount(kind: str) -> None:
    async with (
        _mounted(kind, max_body_bytes=2000) as (base, _agent),
        httpx.AsyncClient(verify=TLS) as http,
    ):
        big = await http.post(
            base + "/message:send",
            content=b"{" + b" " * 5000 + b"}",
            headers={"Content-Type": "application/json", "A2A-Version": "1.0"},
        )
        assert big.status_code == 413
        text = await http.post(base + "/", content=b"{}", headers={"Content-Type": "text/plain"})
        assert (text.status_code, text.json()["error"]["code"]) == (200, -32005)
        legacy = await http.post(
            base + "/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "message/send",
                "params": {
                    "message": {
                        "kind": "message",
                        "messageId": "m",
                        "role": "user",
                        "parts": [{"kind": "data", "data": {"a": 1, "b": 2}}],
                        "metadata": {"skillId": "math.add"},
                    }
                },
            },
        )
        # No A2A-Version header and a 0.3 method name: served as 0.3 under the mount too.
        assert legacy.json()["result"]["status"]["state"] == "completed"
        nowhere = await http.post(
            base + "/.well-known/message:send", json={}, headers={"A2A-Version": "1.0"}
        )
        assert nowhere.status_code == 404


async def test_a_host_loop_keeps_its_own_task_factory() -> None:
    """Mounting and serving the agent leaves the host's event loop as the host set it."""
    loop = asyncio.get_running_loop()
    made: list[asyncio.Task[Any]] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        made.append(task)
        return task

    previous = loop.get_task_factory()
    loop.set_task_factory(factory)
    try:
        async with _mounted("starlette") as (base, _agent), httpx.AsyncClient(verify=TLS) as http:
            for _ in range(2):
                message = add_message()
                message["metadata"] = {"skillId": "math.add"}
                reply = await http.post(
                    base + "/",
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "SendMessage",
                        "params": {"message": message},
                    },
                    headers={"A2A-Version": "1.0"},
                )
                assert reply.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
                assert loop.get_task_factory() is factory
        assert loop.get_task_factory() is factory
        assert made  # the agent's own tasks were made by the host's factory
    finally:
        loop.set_task_factory(previous)
