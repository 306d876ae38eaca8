"""Direct mode (``app=``): no socket, the app's lifespan, streaming and failures."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apcore_a2a.client import A2AClient, A2AClientError, A2AConnectionError, A2ADiscoveryError
from tests.client._sdk_agent import build_sdk_app
from tests.client._stub_agent import StubAgent
from tests.client.conftest import refuse_sockets

URL = "http://agent.local"


async def test_socket_guard_catches_a_real_connection_attempt() -> None:
    # The guard behind every direct-mode scenario must notice a client that does connect.
    with refuse_sockets() as attempts:
        async with A2AClient("http://127.0.0.1:9") as client:
            with pytest.raises(A2AConnectionError):
                await client.discover()
    assert attempts


class LifespanProbe:
    """A stub agent that records lifespan messages."""

    def __init__(self, *, fail_startup: bool = False, supports: bool = True) -> None:
        self.events: list[str] = []
        self.fail_startup = fail_startup
        self.supports = supports
        self.stub = StubAgent()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            assert scope["state"].get("ready") is (True if self.supports else None)
            await self.stub(scope, receive, send)
            return
        if not self.supports:
            raise RuntimeError("lifespan not supported")
        while True:
            message = await receive()
            self.events.append(message["type"])
            if message["type"] == "lifespan.startup":
                if self.fail_startup:
                    await send({"type": "lifespan.startup.failed", "message": "db down"})
                    return
                scope["state"]["ready"] = True
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return


async def test_lifespan_runs_around_the_client() -> None:
    app = LifespanProbe()
    client = A2AClient(URL, app=app)
    assert app.events == []
    async with client:
        assert app.events == ["lifespan.startup"]
        await client.discover()
    assert app.events == ["lifespan.startup", "lifespan.shutdown"]


async def test_lifespan_starts_lazily_without_async_with() -> None:
    app = LifespanProbe()
    client = A2AClient(URL, app=app)
    await asyncio.gather(client.discover(), client.discover(refresh=True))
    assert app.events == ["lifespan.startup"]
    await client.aclose()
    await client.aclose()
    assert app.events == ["lifespan.startup", "lifespan.shutdown"]
    with pytest.raises(A2AClientError, match="closed"):
        await client.discover()


async def test_lifespan_can_be_left_to_the_host() -> None:
    app = LifespanProbe(supports=False)
    async with A2AClient(URL, app=app, lifespan=False) as client:
        card = await client.discover()
    assert card["name"] == "stub" and app.events == []


async def test_app_without_lifespan_support_still_works() -> None:
    app = LifespanProbe(supports=False)
    async with A2AClient(URL, app=app) as client:
        assert (await client.discover())["name"] == "stub"


async def test_failed_startup_is_a_connection_error() -> None:
    client = A2AClient(URL, app=LifespanProbe(fail_startup=True))
    with pytest.raises(A2AConnectionError, match="db down"):
        await client.discover()
    await client.aclose()


async def test_app_crash_before_response_is_http_500() -> None:
    async def crashing(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            raise RuntimeError("no lifespan")
        raise RuntimeError("handler bug")

    async with A2AClient(URL, app=crashing, protocol="1.0") as client:
        with pytest.raises(A2ADiscoveryError, match="HTTP 500"):
            await client.discover()
        with pytest.raises(A2AConnectionError) as err:
            await client.get_task("t")
    assert err.value.status_code == 500


async def test_app_crash_mid_stream_is_a_connection_error() -> None:
    async def half(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            raise RuntimeError("no lifespan")
        if scope["method"] == "GET":  # no card: the pinned protocol posts to the base URL
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        task = {"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}
        body = (
            b'data: {"jsonrpc": "2.0", "id": 1, "result": ' + repr(task).replace("'", '"').encode()
        )
        await send({"type": "http.response.body", "body": body + b"}\n\n", "more_body": True})
        raise RuntimeError("died mid-stream")

    events: list[dict[str, Any]] = []
    async with A2AClient(URL, app=half, protocol="1.0") as client:

        async def drain() -> None:
            async for event in client.resubscribe("t"):
                events.append(event)

        with pytest.raises(A2AConnectionError, match="failed"):
            await drain()
    assert [e["kind"] for e in events] == ["task"]


async def test_direct_stream_delivers_events_before_the_task_ends() -> None:
    # httpx.ASGITransport would hold this stream until the task finished (never, here).
    with refuse_sockets() as attempts:
        async with A2AClient(URL, app=build_sdk_app(URL)) as client:
            task = await client.send_message("slow", return_immediately=True)
            stream = client.resubscribe(task["id"])
            first = await asyncio.wait_for(anext(stream), 30)
            assert first["kind"] == "task" and first["status"]["state"] == "working"
            await client.cancel_task(task["id"])
            rest = [e async for e in stream]
    assert rest[-1]["status"]["state"] == "canceled"
    assert attempts == []


async def test_abandoned_stream_is_closed_in_the_app() -> None:
    # Breaking out of a stream must disconnect the in-process request, not leak it.
    async with A2AClient(URL, app=build_sdk_app(URL)) as client:
        task = await client.send_message("slow", return_immediately=True)
        stream = client.resubscribe(task["id"])
        await anext(stream)
        await asyncio.wait_for(stream.aclose(), 30)  # type: ignore[attr-defined]
        canceled = await client.cancel_task(task["id"])
    assert canceled["status"]["state"] == "canceled"
