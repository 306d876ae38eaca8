"""Talking to the agent under test: official a2a-sdk clients and raw JSON-RPC over httpx."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from a2a.types import StreamResponse, TaskState
from google.protobuf.json_format import MessageToDict

from tests._sdk import make_client

V1 = {"A2A-Version": "1.0"}
#: every binding of the official SDK client, in both protocol versions
BINDINGS = [
    ("JSONRPC", "1.0"),
    ("HTTP+JSON", "1.0"),
    ("GRPC", "1.0"),
    ("JSONRPC", "0.3"),
    ("HTTP+JSON", "0.3"),
    ("GRPC", "0.3"),
]
V03 = {"A2A-Version": "0.3"}

#: (binding, protocol version) pairs the card advertises; the SDK picks the matching transport
TRANSPORTS = [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "0.3")]


async def sdk_client(
    url: str, binding: str = "JSONRPC", version: str = "1.0", *, streaming: bool = True, **http: Any
) -> Any:
    """An SDK ``Client`` that can only use *binding* at protocol *version* (streaming by
    default; *http*: options of its ``httpx.AsyncClient``)."""
    return await make_client(url, binding, version, streaming=streaming, **http)


def state_name(state: int) -> str:
    return TaskState.Name(state).removeprefix("TASK_STATE_")


def summarize(event: StreamResponse) -> tuple[Any, ...]:
    """A compact, comparable view of one stream event."""
    kind = event.WhichOneof("payload")
    if kind == "task":
        return ("task", state_name(event.task.status.state))
    if kind == "status_update":
        return ("status", state_name(event.status_update.status.state))
    if kind == "artifact_update":
        upd = event.artifact_update
        return ("artifact", upd.append, upd.last_chunk)
    if kind == "message":
        return ("message",)
    raise AssertionError(f"unexpected stream event {event}")


async def collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in stream]


def parts_data(parts: Any) -> list[Any]:
    """Parts as plain Python: text as str, data as dict."""
    out: list[Any] = []
    for part in parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            out.append(part.text)
        elif kind == "data":
            out.append(MessageToDict(part.data))
    return out


def rpc(method: str, params: dict[str, Any], rid: int | str = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def wire_message(skill: str | None, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A 1.0 JSON message with one data part."""
    msg: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": data}],
        **extra,
    }
    if skill:
        msg["metadata"] = {"skillId": skill}
    return msg


def wire_message_03(skill: str | None, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A 0.3 JSON message with one data part."""
    msg: dict[str, Any] = {
        "kind": "message",
        "messageId": uuid.uuid4().hex,
        "role": "user",
        "parts": [{"kind": "data", "data": data}],
        **extra,
    }
    if skill:
        msg["metadata"] = {"skillId": skill}
    return msg


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """Yield the JSON payload of each ``data:`` line of an SSE response."""
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            yield json.loads(line[5:].strip())


async def sse_post(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """POST *body* and read the whole SSE answer."""
    async with http.stream("POST", url, json=body, headers=headers or V1) as response:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            events = [e async for e in sse_events(response)]
        else:
            await response.aread()
            events = [response.json()]
        return response, events
