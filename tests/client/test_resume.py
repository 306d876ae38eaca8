"""``A2AClient.resubscribe`` resumes a dropped stream by itself, losing and repeating nothing.

The client talks to a real server through a TCP proxy that the test cuts mid-stream (every
connection aborted, the listener reopened on the same port).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apcore_a2a import A2AClient
from apcore_a2a.client.errors import A2AConnectionError, InvalidAgentResponseError

from .._proxy import TcpProxy
from .._support import ROOT, cli_server, free_port, running_server
from ._stub_agent import CARD_V10, StubAgent
from .conftest import refuse_sockets

EXTENSIONS = str(ROOT / "examples" / "extensions")


def _remaining(event: dict[str, Any]) -> list[int]:
    if event["kind"] != "artifact-update":
        return []
    return [
        int(part["data"]["remaining"])
        for part in event["artifact"]["parts"]
        if isinstance(part.get("data"), dict) and "remaining" in part["data"]
    ]


@contextlib.asynccontextmanager
async def _behind_proxy(protocol: Any = "auto") -> AsyncIterator[tuple[A2AClient, TcpProxy]]:
    """The examples agent reached through a proxy the test can cut, and a client for it."""
    port = free_port()
    proxy = TcpProxy("127.0.0.1", port)
    await proxy.start()
    public = f"http://127.0.0.1:{proxy.port}"
    args = ["--extensions-dir", EXTENSIONS, "--url", public]
    try:
        with cli_server(args, port=port):
            async with A2AClient(public, protocol=protocol) as client:
                yield client, proxy
    finally:
        await proxy.stop()


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_resubscribe_survives_a_cut_connection(protocol: Any) -> None:
    async with _behind_proxy(protocol) as (client, proxy):
        task = await client.send_message(
            {"start": 12, "delay": 0.1}, skill_id="text.countdown", return_immediately=True
        )
        kinds: list[str] = []
        live: list[int] = []
        async for event in client.resubscribe(task["id"]):
            kinds.append(event["kind"])
            live += _remaining(event)
            if len(live) == 3:
                await proxy.stop()  # the stream's connection is gone
                await proxy.start()
    assert kinds[0] == "task" and kinds.count("task") == 1  # the snapshot, once
    assert live == list(range(live[0], -1, -1)), live  # every chunk after it, once
    assert kinds[-1] == "status-update"


async def test_resubscribe_gives_up_after_its_retries() -> None:
    async with _behind_proxy() as (client, proxy):
        task = await client.send_message(
            {"start": 20, "delay": 0.1}, skill_id="text.countdown", return_immediately=True
        )

        async def follow() -> None:
            async for event in client.resubscribe(task["id"], max_retries=2):
                if _remaining(event):
                    await proxy.stop()  # and it stays down

        with pytest.raises(A2AConnectionError, match="gave up after 2 resume"):
            await follow()


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_stream_message_resumes_a_cut_stream_by_subscription(protocol: Any) -> None:
    async with _behind_proxy(protocol) as (client, proxy):
        kinds: list[str] = []
        live: list[int] = []
        async for event in client.stream_message(
            {"start": 10, "delay": 0.05}, skill_id="text.countdown"
        ):
            kinds.append(event["kind"])
            live += _remaining(event)
            if len(live) == 3:
                await proxy.stop()  # the message stream's connection is gone
                await proxy.start()
    assert kinds[0] == "task" and kinds.count("task") == 1  # resumed without a new snapshot
    assert live == list(range(10, -1, -1)), live  # every chunk once, in order
    assert kinds[-1] == "status-update" and len(kinds) == 14  # task, working, 11, completed


class _Replayer:
    """A hostile agent: every stream (the first, and each resume whatever its
    ``Last-Event-ID``) sends the same event, id 1, then stalls until the client goes."""

    def __init__(self) -> None:
        self.stub = StubAgent(card=dict(CARD_V10), card_paths=())
        self.resumed_from: list[str | None] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.stub(scope, receive, send)
            return
        request = json.loads((await receive())["body"])
        headers = dict(scope["headers"])
        if request["method"] == "SubscribeToTask":
            self.resumed_from.append(headers.get(b"last-event-id", b"").decode() or None)
        task = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}
        event = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"task": task}})
        start = {"type": "http.response.start", "status": 200}
        await send(start | {"headers": [(b"content-type", b"text/event-stream")]})
        body = f"id: 1\ndata: {event}\n\n".encode()
        await send({"type": "http.response.body", "body": body, "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass


async def test_an_agent_that_replays_the_event_it_resumes_from_is_given_up_on() -> None:
    """Resumed with ``Last-Event-ID: 1``, the agent sends event 1 again, then stalls. The
    repeat is not yielded (nothing is repeated) and not counted as progress, so the
    client gives up after its retries; it yielded the same event forever."""
    agent = _Replayer()
    seen: list[dict[str, Any]] = []

    async def follow(client: A2AClient) -> None:
        async for event in client.stream_message("x", max_retries=2):
            seen.append(event)
            assert len(seen) <= 3, "the same event again and again"

    async with running_server(agent) as url, A2AClient(url, timeout=1, protocol="1.0") as c:
        async with asyncio.timeout(120):  # a hang guard, not a speed target
            with pytest.raises(A2AConnectionError, match="gave up after 2 resume attempt"):
                await follow(c)
    assert [e["id"] for e in seen] == ["t-1"]
    assert agent.resumed_from == ["1", "1"]


class _OddIds:
    """A hostile agent: each stream sends one working task whose SSE id is *event_id*,
    then drops the connection (the client resumes from that id)."""

    def __init__(self, event_id: str) -> None:
        self.event_id = event_id
        self.stub = StubAgent(card=dict(CARD_V10), card_paths=())
        self.streams = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.stub(scope, receive, send)
            return
        self.streams += 1
        request = json.loads((await receive())["body"])
        task = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}
        event = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"task": task}})
        start = {"type": "http.response.start", "status": 200}
        await send(start | {"headers": [(b"content-type", b"text/event-stream")]})
        body = f"id: {self.event_id}\ndata: {event}\n\n".encode()
        await send({"type": "http.response.body", "body": body, "more_body": True})
        raise ConnectionAbortedError("the stream drops")  # uvicorn cuts the connection


@pytest.mark.parametrize("event_id", ["caf\u00e9", "a\x01b", "\u202e1", " padded", "x ", "\tx"])
async def test_an_event_id_that_cannot_be_sent_back_is_a_typed_error(event_id: str) -> None:
    """An id that is no HTTP header value (not ASCII, or a control character) cannot go
    back as ``Last-Event-ID``. Before: the resume failed in httpx's header encoding
    (``'ascii' codec can't encode``), or as a failed connection retried and given up on."""
    agent = _OddIds(event_id)
    async with running_server(agent) as url, A2AClient(url, timeout=5, protocol="1.0") as c:
        async with asyncio.timeout(120):  # a hang guard, not a speed target
            with pytest.raises(InvalidAgentResponseError, match="event id") as err:
                async for _event in c.stream_message("x", max_retries=2):
                    pass
    assert "codec" not in err.value.message
    assert agent.streams == 1, "no resume was tried with an id that cannot be sent"


@pytest.mark.parametrize("last_event_id", ["caf\u00e9", "a\x01b", " 1", "1 "])
async def test_a_last_event_id_that_cannot_be_sent_is_refused_before_any_request(
    last_event_id: str,
) -> None:
    """A header value is printable ASCII, spaces and tabs inside only (RFC 9110 §5.5):
    h11 refuses any other as it sends, a bare ``Illegal header value`` (the id repeated)."""
    async with A2AClient("http://127.0.0.1:9", protocol="1.0") as client:
        with refuse_sockets() as attempts, pytest.raises(ValueError, match="last_event_id"):
            async for _event in client.resubscribe("t-1", last_event_id=last_event_id):
                pass
    assert attempts == []
