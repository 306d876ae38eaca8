"""A hostile or broken agent cannot take the client's memory or time, nor crash it.

Each agent here is a real server on 127.0.0.1 answering what no honest agent would: a body
larger than the client reads (plain, or a gzip bomb that inflates past it), an SSE event
that never ends, JSON nested deeper than Python parses, an answer trickled a byte at a
time. The client raises its typed errors (docs/client.md, *Errors*) and gives up.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
from typing import Any

import pytest

from apcore_a2a.client import (
    A2AClient,
    A2AConnectionError,
    A2ADiscoveryError,
    InvalidAgentResponseError,
)
from apcore_a2a.client._bounded import MAX_ANSWER_BYTES
from apcore_a2a.client.card import MAX_CARD_BYTES
from apcore_a2a.client.client import PUSH_STATUS_EXTENSION
from tests._support import running_server
from tests.client._stub_agent import CARD_V10, Reply, StubAgent, json_reply

TASK_03 = {"kind": "task", "id": "t-1", "contextId": "c-1", "status": {"state": "completed"}}
#: deeper than Python's JSON parser goes (its recursion limit)
DEEP = b"[" * 100_000 + b"]" * 100_000


@functools.cache
def _bomb(padding: int) -> bytes:
    """A gzip body of a few kB whose JSON-RPC answer inflates to more than *padding* bytes."""
    answer = b'{"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": "t-1"' + b" " * padding
    return gzip.compress(answer + b"}}}", compresslevel=9)


def _gzip_reply(media_type: str, body: bytes) -> Reply:
    return 200, {"content-type": media_type, "content-encoding": "gzip"}, [body]


async def test_a_card_larger_than_the_limit_is_not_read() -> None:
    card = json.dumps({**CARD_V10, "description": "x" * MAX_CARD_BYTES}).encode()
    async with running_server(StubAgent(card=card)) as url, A2AClient(url) as client:
        with pytest.raises(A2ADiscoveryError, match=f"larger than {MAX_CARD_BYTES} bytes"):
            await client.discover()


async def test_a_gzip_bomb_card_is_not_inflated_whole() -> None:
    card = json.dumps(CARD_V10).encode()[:-1] + b' "pad": "' + b"x" * MAX_CARD_BYTES + b'"}'
    stub = StubAgent(card=b"")

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/.well-known/agent-card"):
            body = gzip.compress(card, compresslevel=9)
            headers = [(b"content-type", b"application/json"), (b"content-encoding", b"gzip")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await stub(scope, receive, send)

    async with running_server(app) as url, A2AClient(url) as client:
        with pytest.raises(A2ADiscoveryError, match="larger than"):
            await client.discover()


async def test_a_gzip_bomb_answer_is_an_invalid_response() -> None:
    stub = StubAgent(
        rpc=lambda _b: _gzip_reply("application/json", _bomb(MAX_ANSWER_BYTES)), card_paths=()
    )
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(InvalidAgentResponseError, match=f"larger than {MAX_ANSWER_BYTES}"):
            await client.send_message("hi")
        # Within the limit, the same answer is read: the limit is on size, not on gzip.
        stub.rpc = lambda _b: _gzip_reply("application/json", _bomb(1000))
        assert (await client.send_message("hi"))["id"] == "t-1"


async def test_an_event_that_never_ends_is_an_invalid_response() -> None:
    # One SSE line with no end, as long as the client would read it (here: past the limit).
    endless = gzip.compress(b"data: " + b"a" * (MAX_ANSWER_BYTES + 1), compresslevel=9)
    stub = StubAgent(rpc=lambda _b: _gzip_reply("text/event-stream", endless), card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(InvalidAgentResponseError, match="an event of the stream"):
            await _drain(client.stream_message("hi"))


async def test_an_event_of_many_short_lines_counts_what_holding_them_costs() -> None:
    # A valid task whose JSON is spread over a million data lines of 9 bytes: 9 MiB on the
    # wire, but the SSE reader holds each line as a string of its own (about 60 bytes, 7x
    # what it sent). Counted at 64 bytes a line more, it is past the limit (73 MiB).
    head = '{"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": "t-1", "contextId": "c-1",'
    head += ' "status": {"state": "TASK_STATE_WORKING"}, "metadata": {"a": ['
    lines = MAX_ANSWER_BYTES // 64
    body = b"data: " + head.encode() + b"\n" + b"data: 1,\n" * lines + b"data: 1]}}}}\n\n"
    stub = StubAgent(rpc=lambda _b: (200, {"content-type": "text/event-stream"}, [body]))
    stub.card_paths = ()
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(InvalidAgentResponseError, match=r"an event of the stream .* larger"):
            await _drain(client.stream_message("hi"))
        # The same lines, fewer of them, are read: the bound is on size, not on lines.
        body = body.replace(b"data: 1,\n" * (lines - 1000), b"")
        stub.rpc = lambda _b: (200, {"content-type": "text/event-stream"}, [body])
        [event] = [e async for e in client.stream_message("hi")]
    assert len(event["metadata"]["a"]) == 1001


class _Endless:
    """Answers every POST with *start* and then ``a`` for ever, 64 KiB at a time, until the
    client goes away; counts the bytes it sent."""

    def __init__(self, media_type: str, start: bytes) -> None:
        self.media_type, self.start, self.sent = media_type, start, 0
        self.stub = StubAgent(card_paths=())

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.stub(scope, receive, send)
            return
        while (await receive()).get("more_body"):  # the request, before the answer
            pass
        watcher = asyncio.create_task(receive())  # only http.disconnect is left to come
        headers = [(b"content-type", self.media_type.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        chunk = self.start
        while not watcher.done():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            self.sent += len(chunk)
            chunk = b"a" * 65536
            await asyncio.sleep(0)  # the watcher's turn, should send no longer wait


@pytest.mark.parametrize(
    ("media_type", "start", "said"),
    [
        ("application/json", b'{"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": "', "answer"),
        ("text/event-stream", b"data: ", "event of the stream"),
    ],
    ids=["json", "sse"],
)
async def test_an_endless_answer_is_read_to_the_limit_and_no_further(
    media_type: str, start: bytes, said: str
) -> None:
    agent = _Endless(media_type, start)
    async with running_server(agent) as url, A2AClient(url, protocol="1.0") as client:
        call = client.get_task("t-1") if said == "answer" else _drain(client.stream_message("hi"))
        async with asyncio.timeout(120):  # a hang guard, should the bound go: no speed target
            with pytest.raises(InvalidAgentResponseError, match=f"{said} .* larger than"):
                await call
    # The client closed the connection there: the agent wrote at most the limit and what
    # the sockets' buffers held.
    assert MAX_ANSWER_BYTES < agent.sent < 2 * MAX_ANSWER_BYTES


async def test_events_split_anywhere_still_arrive() -> None:
    task = {"task": {"id": "t-1", "status": {"state": "TASK_STATE_COMPLETED"}}}
    event = b"data: " + json.dumps({"jsonrpc": "2.0", "id": 1, "result": task}).encode()
    chunks = [b": keep-alive\r\n\r", b"\n", event[:9], event[9:], b"\n", b"\n"]
    stub = StubAgent(
        rpc=lambda _b: (200, {"content-type": "text/event-stream"}, chunks), card_paths=()
    )
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        events = [e async for e in client.stream_message("hi")]
    assert [(e["kind"], e["status"]["state"]) for e in events] == [("task", "completed")]


@pytest.mark.parametrize(
    ("where", "error"),
    [
        ("card", A2ADiscoveryError),
        ("answer", InvalidAgentResponseError),
        ("error-answer", A2AConnectionError),
        ("event", InvalidAgentResponseError),
    ],
)
async def test_json_deeper_than_python_parses_is_a_typed_error(
    where: str, error: type[Exception]
) -> None:
    replies: dict[str, Reply] = {
        "answer": (200, {"content-type": "application/json"}, [DEEP]),
        "error-answer": (500, {"content-type": "application/json"}, [DEEP]),
        "event": (200, {"content-type": "text/event-stream"}, [b"data: " + DEEP + b"\n\n"]),
    }
    stub = StubAgent(rpc=lambda _b: replies[where], card_paths=())
    if where == "card":
        stub = StubAgent(card=DEEP)
    protocol = "auto" if where == "card" else "1.0"
    async with running_server(stub) as url, A2AClient(url, protocol=protocol) as client:
        call = (
            _drain(client.stream_message("hi")) if where == "event" else client.send_message("hi")
        )
        with pytest.raises(error):
            await call


async def _drain(events: Any) -> None:
    async for _event in events:
        pass


class _Trickle:
    """Answers the card (*what* ``"card"``), every POST (``"answer"``) or a push status
    (``"push status"``) one byte at a time until the client goes away, each byte well within
    the client's read timeout."""

    def __init__(self, what: str) -> None:
        self.what = what
        paths = {"answer": (), "card": ("/.well-known/x",)}
        self.stub = StubAgent(card_paths=paths.get(what, ("/.well-known/agent-card.json",)))
        self.stub.card["capabilities"] |= {"extensions": [{"uri": PUSH_STATUS_EXTENSION}]}

    def _trickled(self, scope: dict[str, Any]) -> bool:
        if self.what == "push status":
            return str(scope.get("path", "")).startswith("/push/status/")
        return scope.get("method") == ("GET" if self.what == "card" else "POST")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self._trickled(scope):
            await self.stub(scope, receive, send)
            return
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        while not gone.is_set():
            await send({"type": "http.response.body", "body": b" ", "more_body": True})
            await asyncio.sleep(0.1)
        await watcher


@pytest.mark.parametrize("what", ["card", "answer", "push status"])
async def test_the_timeout_bounds_an_answer_trickled_a_byte_at_a_time(what: str) -> None:
    agent = _Trickle(what)
    calls = {"card": A2AClient.discover, "answer": lambda c: c.get_task("t-1")}
    call = calls.get(what, lambda c: c.push_status("t-1"))
    async with running_server(agent) as url:
        client = A2AClient(url, timeout=1, protocol="1.0" if what == "answer" else "auto")
        async with client, asyncio.timeout(120):  # a hang guard, not a speed target
            with pytest.raises(A2AConnectionError, match="timed out"):
                await call(client)


async def test_card_members_of_the_wrong_type_offer_nothing() -> None:
    stub = StubAgent(rpc=lambda _b: json_reply({"jsonrpc": "2.0", "id": 1, "result": TASK_03}))
    async with running_server(stub) as url:
        # Interface lists that are no lists: the 0.3 ``url`` is what the card offers.
        stub.card = CARD_V10 | {
            "supportedInterfaces": {"url": url},
            "additionalInterfaces": 7,
            "url": url + "/rpc",
            "preferredTransport": "JSONRPC",
        }
        async with A2AClient(url) as client:
            task = await client.send_message("hi")
    assert task["status"]["state"] == "completed"
    assert [(s.path, s.rpc_method) for s in stub.seen if s.method == "POST"] == [
        ("/rpc", "message/send")
    ]


@pytest.mark.parametrize(
    ("method", "times"), [("send_message", 3.5), ("get_task", 3.5), ("stream_message", 8.5)]
)
async def test_a_large_answer_is_not_copied_needlessly(method: str, times: float) -> None:
    """Memory (traced by tracemalloc; protobuf's own is not traced) for a task with a 4 MB
    artifact, from the answer's bytes to the result dict. An answer: its bytes, the SDK's
    JSON parse (a decoded copy and its values), the result; the answer as received is not
    kept besides (protobuf holds a task whole): it was 4 times. A stream event is decoded
    and split into lines by httpx-sse twice (our tap, then the SDK); the tap no longer
    encodes it to search it nor joins it into one more copy: it was 11 times."""
    import gc
    import tracemalloc

    size = 4 * 1024 * 1024
    artifact = {"artifactId": "a", "parts": [{"text": "x" * size}]}
    task = {"id": "t-1", "status": {"state": "TASK_STATE_COMPLETED"}, "artifacts": [artifact]}
    result = task if method == "get_task" else {"task": task}
    answer = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()
    media_type = "text/event-stream" if method == "stream_message" else "application/json"
    body = b"data: " + answer + b"\n\n" if method == "stream_message" else answer
    stub = StubAgent(rpc=lambda _body: (200, {"content-type": media_type}, [body]))
    async with A2AClient("http://stub.local", app=stub, protocol="1.0") as client:

        async def call() -> dict[str, Any]:
            if method == "get_task":
                return await client.get_task("t-1")
            if method == "send_message":
                return await client.send_message("x")
            return [event async for event in client.stream_message("x")][-1]

        await call()  # imports and caches warmed
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            got = await call()
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
    assert len(got["artifacts"][0]["parts"][0]["text"]) == size
    assert peak < times * size, f"{peak / size:.2f} times the artifact"


async def test_the_timeout_bounds_each_wait_of_a_stream_for_the_agents_bytes() -> None:
    """docs/client.md, ``timeout``: on a stream it bounds each wait for the agent's next
    bytes; an agent that starts an event and sends no more is given up on."""
    agent = _StalledStream()
    async with running_server(agent) as url, A2AClient(url, timeout=1, protocol="1.0") as c:
        async with asyncio.timeout(120):  # a hang guard, not a speed target
            with pytest.raises(A2AConnectionError, match="timed out"):
                await anext(aiter(c.stream_message("x")))


class _StalledStream:
    """Starts an SSE event, then sends nothing until the client goes away."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await StubAgent()(scope, receive, send)
            return
        await receive()
        start = {"type": "http.response.start", "status": 200}
        await send(start | {"headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b'data: {"json', "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass


@pytest.mark.parametrize("capabilities", [["push"], "all", {"extensions": {"uri": "x"}}])
async def test_a_card_whose_capabilities_are_no_object_declares_no_push_status(
    capabilities: Any,
) -> None:
    """``push_status`` reads the card's extensions as data from the network: members of the
    wrong type declare nothing (no request, ``None``), not an ``AttributeError``."""
    stub = StubAgent(card=CARD_V10 | {"capabilities": capabilities})
    async with running_server(stub) as url, A2AClient(url) as client:
        assert await client.push_status("t-1") is None
    assert not [s for s in stub.seen if "/push/status/" in s.path]


async def test_a_body_that_is_not_in_its_content_encoding_is_a_typed_error() -> None:
    stub = StubAgent(rpc=lambda _b: _gzip_reply("application/json", b"not gzip"), card_paths=())

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/.well-known/agent-card"):
            headers = [(b"content-type", b"application/json"), (b"content-encoding", b"gzip")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": json.dumps(CARD_V10).encode()})
            return
        await stub(scope, receive, send)

    async with running_server(app) as url, A2AClient(url) as client:
        with pytest.raises(A2ADiscoveryError, match="cannot be decoded"):
            await client.discover()
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(InvalidAgentResponseError):
            await client.send_message("hi")


def _raw_result(result: bytes) -> Reply:
    """A JSON-RPC answer whose ``result`` is *result* as written (JSON or not)."""
    return (
        200,
        {"content-type": "application/json"},
        [b'{"jsonrpc":"2.0","id":1,"result":' + result + b"}"],
    )


@pytest.mark.usefixtures("tracing")
async def test_enum_numbers_the_client_does_not_know_read_as_unknown() -> None:
    """protobuf keeps an enum number it has no name for; the task is not refused for it
    (a ``KeyError`` escaped before: a traceback from the CLI)."""
    task = {
        "id": "t-1",
        "status": {"state": 99},
        "history": [{"messageId": "m-1", "role": 7, "parts": [{"text": "hi"}]}],
    }
    stub = StubAgent(rpc=lambda _b: _raw_result(json.dumps(task).encode()), card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        got = await client.get_task("t-1")
    assert (got["status"]["state"], got["history"][0]["role"]) == ("unknown", "unknown")
    assert got["history"][0]["parts"][0]["text"] == "hi"


@pytest.mark.parametrize("number", [b"NaN", b"-Infinity", b"1e400"])
async def test_a_number_json_has_not_is_an_invalid_response(number: bytes) -> None:
    """Python's JSON reader takes ``NaN``, ``Infinity`` and a number too large for a
    double (as infinity); no JSON value holds one, so the answer is invalid (a bare
    ``ValueError`` escaped before, which the CLI took for the user's bad input)."""
    task = b'{"id": "t-1", "status": {"state": "TASK_STATE_COMPLETED"}, "metadata": {"x": '
    stub = StubAgent(rpc=lambda _b: _raw_result(task + number + b"}}"), card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(InvalidAgentResponseError, match="no JSON number"):
            await client.get_task("t-1")


async def test_an_etag_that_is_not_ascii_is_not_sent_back() -> None:
    """An ``ETag`` the client cannot send as a header does not make the next card fetch
    fail (a ``UnicodeEncodeError`` escaped before): the card is fetched whole again."""
    stub = StubAgent()
    asked: list[str | None] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/.well-known/agent-card"):
            asked.append(dict(scope["headers"]).get(b"if-none-match", b"").decode() or None)
            headers = [(b"content-type", b"application/json"), (b"etag", '"\u00e9"'.encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": json.dumps(CARD_V10).encode()})
            return
        await stub(scope, receive, send)

    async with running_server(app) as url, A2AClient(url, card_ttl=0) as client:
        first, again = await client.discover(), await client.discover()
    assert first["name"] == again["name"] == "stub"
    assert asked == [None, None]


@pytest.mark.parametrize("where", ["answer", "event", "card"])
async def test_json_naming_a_key_twice_is_an_invalid_response(where: str) -> None:
    """A task whose ``status`` is named twice, failed then completed: Python's reader keeps
    the last, another reader (protobuf's, which the REST binding's answers go through)
    refuses it; the JSON-RPC client read it as completed (an agent's word it could not tell
    apart from the other). Refused as the agent refuses a key named twice (``_json.py``)."""
    twice = (
        b'{"id": "t-1", "status": {"state": "TASK_STATE_FAILED"}, '
        b'"status": {"state": "TASK_STATE_COMPLETED"}}'
    )
    replies: dict[str, Reply] = {
        "answer": _raw_result(twice),
        "event": (
            200,
            {"content-type": "text/event-stream"},
            [b'data: {"jsonrpc":"2.0","id":1,"result":{"task":' + twice + b"}}\n\n"],
        ),
    }
    stub = StubAgent(rpc=lambda _b: replies[where], card_paths=())
    if where == "card":
        stub = StubAgent(card=json.dumps(CARD_V10).encode()[:-1] + b', "name": "again"}')
    async with running_server(stub) as url:
        client = A2AClient(url, protocol="auto" if where == "card" else "1.0")
        calls = {
            "answer": lambda: client.get_task("t-1"),
            "event": lambda: _drain(client.stream_message("hi")),
            "card": client.discover,
        }
        error = A2ADiscoveryError if where == "card" else InvalidAgentResponseError
        async with client:
            with pytest.raises(error, match=r"duplicate key '(status|name)'"):
                await calls[where]()
