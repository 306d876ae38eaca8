"""A2AClient over HTTP+JSON and gRPC: a real agent whose card offers only that binding.

Our server serves JSON-RPC, REST and gRPC (1.0 and 0.3) side by side; a thin ASGI layer
in front of it narrows its card to one binding (and version), and records what reaches
the HTTP side, so each test shows which binding the client really used.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from apcore_a2a.client import (
    A2AAuthenticationError,
    A2AClient,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from tests._support import free_port, running_server
from tests.client._apcore_agent import build_our_app

pytestmark = pytest.mark.asyncio(loop_scope="module")

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
HOOK = "http://127.0.0.1:9/hook"


@dataclass
class Narrowed:
    """*app* with a card offering only *binding* (of *version*, if given)."""

    app: Any
    binding: str = ""
    version: str | None = None
    seen: list[tuple[str, str]] = field(default_factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] not in CARD_PATHS:
            if scope["type"] == "http":
                self.seen.append((scope["method"], scope["path"]))
            await self.app(scope, receive, send)
            return
        start: dict[str, Any] = {}
        body = bytearray()

        async def collect(message: Any) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            else:
                body.extend(message.get("body", b""))

        await self.app(scope, receive, collect)
        card = self.narrow(json.loads(body))
        content = json.dumps(card).encode()
        headers = [
            (k, v) for k, v in start["headers"] if k.lower() not in (b"content-length", b"etag")
        ]
        headers.append((b"content-length", str(len(content)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    def narrow(self, card: dict[str, Any]) -> dict[str, Any]:
        for key in ("url", "preferredTransport", "additionalInterfaces"):
            card.pop(key, None)  # the 0.3 copy: its interfaces are in supportedInterfaces too
        card["supportedInterfaces"] = [
            i
            for i in card["supportedInterfaces"]
            if i["protocolBinding"] == self.binding and self.version in (None, i["protocolVersion"])
        ]
        assert card["supportedInterfaces"], "the agent serves this binding"
        return card


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agent() -> AsyncIterator[tuple[str, Narrowed]]:
    """Our server over a socket, with gRPC on; its card is narrowed per test."""
    port = free_port()
    narrowed = Narrowed(build_our_app(port, grpc_port=free_port()))
    async with running_server(narrowed, port=port) as url:
        yield url, narrowed


@contextlib.asynccontextmanager
async def client_for(
    agent: tuple[str, Narrowed], binding: str, version: str | None = None
) -> AsyncIterator[tuple[A2AClient, Narrowed]]:
    url, narrowed = agent
    narrowed.binding, narrowed.version = binding, version
    narrowed.seen.clear()
    async with A2AClient(url, timeout=30) as client:
        yield client, narrowed


def a2a_requests(narrowed: Narrowed) -> list[tuple[str, str]]:
    return [s for s in narrowed.seen if not s[1].startswith("/.well-known/")]


CASES = [("HTTP+JSON", None), ("HTTP+JSON", "0.3"), ("GRPC", None), ("GRPC", "0.3")]
IDS = ["rest", "rest-0.3", "grpc", "grpc-0.3"]


@pytest.mark.parametrize(("binding", "version"), CASES, ids=IDS)
async def test_send_get_stream_and_cancel(
    agent: tuple[str, Narrowed], binding: str, version: str | None
) -> None:
    async with client_for(agent, binding, version) as (client, narrowed):
        task = await client.send_message({"a": 1, "b": 2}, skill_id="demo.add")
        assert task["status"]["state"] == "completed"
        assert task["artifacts"][0]["parts"][0]["data"] == {"sum": 3}
        assert (await client.get_task(task["id"]))["status"]["state"] == "completed"

        events = [e async for e in client.stream_message("hello", skill_id="demo.echo")]
        assert events[-1]["kind"] in ("task", "status-update")
        assert (events[-1].get("status") or {})["state"] == "completed"

        slow = await client.send_message(
            {"seconds": 30}, skill_id="demo.slow", return_immediately=True
        )
        stream = client.resubscribe(slow["id"])
        first = await anext(stream)
        assert (first["kind"], first["id"]) == ("task", slow["id"])
        canceled = await client.cancel_task(slow["id"])
        assert canceled["status"]["state"] == "canceled"
        rest = [e async for e in stream]
        assert rest and rest[-1]["status"]["state"] == "canceled"

        with pytest.raises(TaskNotFoundError) as missing:
            await client.get_task("no-such-task")
        assert missing.value.code == -32001
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(task["id"])
    posts = a2a_requests(narrowed)
    if binding == "GRPC":
        assert posts == [], "nothing but the card went over HTTP"
    else:
        assert posts and all(path != "/" for _, path in posts), posts


@pytest.mark.parametrize(("binding", "version"), CASES, ids=IDS)
async def test_list_tasks_and_push_configs(
    agent: tuple[str, Narrowed], binding: str, version: str | None
) -> None:
    async with client_for(agent, binding, version) as (client, _):
        task = await client.send_message("hi", skill_id="demo.echo")
        if version == "0.3":
            with pytest.raises(UnsupportedOperationError):
                await client.list_tasks()
        else:
            listed = await client.list_tasks(context_id=task["contextId"])
            assert [t["id"] for t in listed["tasks"]] == [task["id"]]

        config = await client.set_push_config(task["id"], {"url": HOOK, "id": "c1"})
        assert (config["id"], config["taskId"], config["url"]) == ("c1", task["id"], HOOK)
        fetched = await client.get_push_config(task["id"], "c1")
        assert (fetched["id"], fetched["url"]) == ("c1", HOOK)
        if (binding, version) == ("HTTP+JSON", "0.3"):
            # a2a-sdk's 0.3 REST transport offers neither call.
            with pytest.raises(UnsupportedOperationError):
                await client.list_push_configs(task["id"])
            with pytest.raises(UnsupportedOperationError):
                await client.delete_push_config(task["id"], "c1")
            return
        assert [c["id"] for c in await client.list_push_configs(task["id"])] == ["c1"]
        await client.delete_push_config(task["id"], "c1")
        assert await client.list_push_configs(task["id"]) == []


async def test_json_rpc_is_preferred_when_the_card_offers_it(
    agent: tuple[str, Narrowed],
) -> None:
    url, narrowed = agent
    narrowed.binding = ""
    narrowed.narrow = lambda card: card  # type: ignore[method-assign]
    try:
        narrowed.seen.clear()
        async with A2AClient(url) as client:
            await client.send_message("hi", skill_id="demo.echo")
        assert a2a_requests(narrowed) == [("POST", "/")]
    finally:
        del narrowed.narrow


async def test_in_process_client_speaks_rest(agent: tuple[str, Narrowed]) -> None:
    narrowed = Narrowed(build_our_app(), "HTTP+JSON")
    async with A2AClient("http://127.0.0.1:8000", app=narrowed) as client:
        task = await client.send_message({"a": 2, "b": 3}, skill_id="demo.add")
        events = [e async for e in client.stream_message("x", skill_id="demo.echo")]
    assert task["artifacts"][0]["parts"][0]["data"] == {"sum": 5}
    assert events[-1]["status"]["state"] == "completed"
    assert ("POST", "/message:send") in narrowed.seen
    assert ("POST", "/message:stream") in narrowed.seen


async def test_grpc_calls_carry_the_callers_headers_as_metadata() -> None:
    port = free_port()
    narrowed = Narrowed(
        build_our_app(port, grpc_port=free_port(), api_keys=("k-alice=alice",)), "GRPC"
    )
    async with running_server(narrowed, port=port) as url:
        async with A2AClient(url, headers={"X-API-Key": "k-alice"}) as client:
            task = await client.send_message("hi", skill_id="demo.echo")
            assert task["status"]["state"] == "completed"
        async with A2AClient(url) as anonymous:
            with pytest.raises(A2AAuthenticationError):
                await anonymous.get_task(task["id"])
        async with A2AClient(url, headers={"X-API-Key": "wrong"}) as stranger:
            with pytest.raises(A2AAuthenticationError):
                await stranger.get_task(task["id"])
    assert a2a_requests(narrowed) == []


ROBOT_KEY = "k-robot-0123456789abcdef"
ALL_CASES = [(b, v) for b in ("JSONRPC", "HTTP+JSON", "GRPC") for v in ("1.0", "0.3")]


@pytest.mark.parametrize(("binding", "version"), ALL_CASES, ids=[f"{b}-{v}" for b, v in ALL_CASES])
async def test_refused_credentials_are_authentication_errors(binding: str, version: str) -> None:
    """The agent's 401 and 403 (REST: spec §11.6's error object alone) are read as
    ``A2AAuthenticationError`` with the agent's message, on every binding and version."""
    port = free_port()
    app = build_our_app(
        port, grpc_port=free_port(), api_keys=(f"{ROBOT_KEY}=robot",), required_roles=("writer",)
    )
    narrowed = Narrowed(app, binding, version)
    refused = {}
    async with running_server(narrowed, port=port) as url:
        for status, headers in ((401, {}), (403, {"X-API-Key": ROBOT_KEY})):
            async with A2AClient(url, headers=headers, timeout=30) as client:
                with pytest.raises(A2AAuthenticationError) as err:
                    await client.get_task("t-1")
            refused[status] = err.value.message
    assert refused[401].endswith("Missing or invalid API key"), refused
    assert refused[403].endswith("Permission denied: this agent requires the role 'writer'")
