"""Test doubles at the edge we do not own: the remote agent's HTTP answers.

``StubAgent`` is a bare ASGI app whose JSON-RPC replies are scripted per test (errors
of every code, odd SSE framing, broken bodies). ``Recorder`` wraps any ASGI app and
records each HTTP request (path, headers, JSON-RPC method) that reaches it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Reply = tuple[int, dict[str, str], list[bytes]]

CARD_V10 = {
    "name": "stub",
    "description": "scripted agent",
    "version": "1",
    "supportedInterfaces": [
        {"url": "http://stub.local/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ],
    "capabilities": {"streaming": True},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [],
}


#: a finished task as 1.0 and 0.3 answer it, and 1.0 REST's TASK_NOT_FOUND error object
TASK = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_COMPLETED"}}
TASK_03 = {"kind": "task", "id": "t-1", "contextId": "c-1", "status": {"state": "completed"}}
NOT_FOUND = {
    "code": 404,
    "status": "NOT_FOUND",
    "message": "no such task",
    "details": [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "TASK_NOT_FOUND",
            "domain": "a2a-protocol.org",
        }
    ],
}


def card_for(url: str, binding: str, version: str) -> dict[str, Any]:
    """A card naming the stub at *url* for *binding* and *version* (0.3: its own keys)."""
    if version == "0.3":
        card = {k: v for k, v in CARD_V10.items() if k != "supportedInterfaces"}
        return card | {"url": url, "preferredTransport": binding, "protocolVersion": "0.3"}
    interface = {"url": url, "protocolBinding": binding, "protocolVersion": version}
    return CARD_V10 | {"supportedInterfaces": [interface]}


def json_reply(payload: Any, status: int = 200) -> Reply:
    return status, {"content-type": "application/json"}, [json.dumps(payload).encode()]


def rpc_error(code: int, message: str = "boom", data: Any = None) -> Reply:
    return json_reply(
        {"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": message, "data": data}}
    )


def sse_reply(*chunks: str) -> Reply:
    return 200, {"content-type": "text/event-stream"}, [c.encode() for c in chunks]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    rpc_method: str | None = None
    params: Any = None


async def _read_body(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def _send(send: Any, reply: Reply) -> None:
    status, headers, chunks = reply
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    for chunk in chunks:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        await send({"type": message["type"] + ".complete"})
        if message["type"] == "lifespan.shutdown":
            return


@dataclass
class StubAgent:
    """Serves ``card`` at the well-known path and ``rpc(body)`` for every POST."""

    rpc: Callable[[dict[str, Any]], Reply] = lambda _body: rpc_error(-32603)
    card: Any = field(default_factory=lambda: dict(CARD_V10))
    card_paths: tuple[str, ...] = ("/.well-known/agent-card.json",)
    seen: list[Seen] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        body = await _read_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        seen = Seen(scope["method"], scope["path"], headers)
        self.seen.append(seen)
        if scope["method"] == "GET" and scope["path"] in self.card_paths:
            card = self.card
            if isinstance(card, bytes):
                await _send(send, (200, {"content-type": "application/json"}, [card]))
            else:
                await _send(send, json_reply(card))
            return
        if scope["method"] != "POST":
            await _send(send, (404, {"content-type": "text/plain"}, [b"not found"]))
            return
        if not body:  # the client went away before we read the request
            return
        request = json.loads(body)
        seen.rpc_method, seen.params = request.get("method"), request.get("params")
        await _send(send, self.rpc(request))


@dataclass
class AnsweringAgent(StubAgent):
    """A stub agent answering every request but for its card with :attr:`answer` (a REST
    ``GET`` or ``:subscribe`` has no body, which the plain stub takes for a client gone
    away)."""

    answer: Reply = field(default_factory=lambda: json_reply({}))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in self.card_paths:
            await super().__call__(scope, receive, send)
            return
        await _send(send, self.answer)


@dataclass
class Recorder:
    """Wraps an ASGI app and records every HTTP request that reaches it."""

    app: Any
    seen: list[Seen] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        seen = Seen(scope["method"], scope["path"], headers)
        self.seen.append(seen)
        body = await _read_body(receive)
        if body:
            try:
                request = json.loads(body)
                seen.rpc_method, seen.params = request.get("method"), request.get("params")
            except ValueError:
                pass
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def rpc_methods(self) -> list[str]:
        return [s.rpc_method for s in self.seen if s.rpc_method]

    def card_fetches(self) -> int:
        return sum(1 for s in self.seen if s.path.startswith("/.well-known/"))
