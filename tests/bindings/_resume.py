"""Streams with their event ids, on every binding (the SDK clients do not expose ids).

HTTP bindings read the SSE ``id:`` lines and send ``Last-Event-ID``; gRPC streams carry
no ids (standard wire only), so their events have the id ``None``. Each event is reduced
to a binding-neutral summary, so the parity tests can compare the six transports
directly.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import grpc.aio
import httpx
from a2a.compat.v0_3 import a2a_v0_3_pb2, a2a_v0_3_pb2_grpc
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.unknown_fields import UnknownFieldSet

from tests._support import TLS, find_key, sse_frames

Event = tuple[str | None, Any]  # (id, summary)


def summary(payload: dict[str, Any]) -> Any:
    """``("task", state)``, ``("status", state)`` or ``("chunk", remaining)`` of one event."""
    result = payload.get("result", payload)
    kind = result.get("kind")
    for key, name in (("task", "task"), ("statusUpdate", "status"), ("artifactUpdate", "chunk")):
        if key in result:
            result, kind = result[key], name
    if kind in ("status-update", "artifact-update"):
        kind = "status" if kind == "status-update" else "chunk"
    if kind == "chunk":
        return ("chunk", int(find_key(result["artifact"], "remaining")[0]))
    state = str(result["status"]["state"]).lower().removeprefix("task_state_")
    return (kind, state)


def _message(version: str, binding: str, start: int) -> dict[str, Any]:
    data = {"start": start}
    msg: dict[str, Any] = {"messageId": uuid.uuid4().hex, "metadata": {"skillId": "demo.countdown"}}
    if binding == "JSONRPC" and version == "0.3":
        msg.update(kind="message", role="user", parts=[{"kind": "data", "data": data}])
    elif version == "0.3":  # the JSON (or protobuf) form of the 0.3 schema
        msg.update(role="ROLE_USER", content=[{"data": {"data": data}}])
    else:
        msg.update(role="ROLE_USER", parts=[{"data": data}])
    return msg


async def _sse(
    url: str, headers: dict[str, str], body: Any, cut_after: int | None
) -> tuple[list[Event], str]:
    events: list[Event] = []
    task_id = ""
    async with (
        httpx.AsyncClient(timeout=20.0, verify=TLS) as http,
        http.stream("POST", url, headers=headers, json=body) as response,
    ):
        assert response.status_code == 200, await response.aread()
        async with contextlib.aclosing(sse_frames(response)) as frames:
            async for event_id, payload in frames:
                assert "error" not in payload, payload
                if not events:
                    task_id = (find_key(payload.get("result", payload), "id") or [""])[0]
                events.append((event_id, summary(payload)))
                if cut_after is not None and len(events) >= cut_after:
                    break  # leaving the block drops the connection
    return events, task_id


async def _http(
    binding: str, version: str, url: str, task_id: str | None, last_id: str | None, **kw: Any
) -> tuple[list[Event], str]:
    headers = {"A2A-Version": version}
    if last_id is not None:
        headers["Last-Event-ID"] = last_id
    prefix = "/v1" if version == "0.3" else ""
    if binding == "HTTP+JSON":
        if task_id is None:
            body = {"message": _message(version, binding, kw["start"])}
            return await _sse(f"{url}{prefix}/message:stream", headers, body, kw.get("cut_after"))
        return await _sse(f"{url}{prefix}/tasks/{task_id}:subscribe", headers, None, None)
    if task_id is None:
        method = "message/stream" if version == "0.3" else "SendStreamingMessage"
        params: dict[str, Any] = {"message": _message(version, binding, kw["start"])}
    else:
        method = "tasks/resubscribe" if version == "0.3" else "SubscribeToTask"
        params = {"id": task_id}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return await _sse(url, headers, body, kw.get("cut_after"))


async def _grpc(
    version: str, address: str, task_id: str | None, last_id: str | None, **kw: Any
) -> tuple[list[Event], str]:
    assert last_id is None, "gRPC offers no id-based resume"
    metadata = [("a2a-version", version)]
    events: list[Event] = []
    found = ""
    async with grpc.aio.insecure_channel(address) as channel:
        if version == "0.3":
            stub: Any = a2a_v0_3_pb2_grpc.A2AServiceStub(channel)
            if task_id is None:
                request: Any = ParseDict(
                    {"request": _message(version, "GRPC", kw["start"])},
                    a2a_v0_3_pb2.SendMessageRequest(),
                )
                call = stub.SendStreamingMessage(request, metadata=metadata)
            else:
                request = a2a_v0_3_pb2.TaskSubscriptionRequest(name=f"tasks/{task_id}")
                call = stub.TaskSubscription(request, metadata=metadata)
        else:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            if task_id is None:
                request = ParseDict(
                    {"message": _message(version, "GRPC", kw["start"])},
                    a2a_pb2.SendMessageRequest(),
                )
                call = stub.SendStreamingMessage(request, metadata=metadata)
            else:
                request = a2a_pb2.SubscribeToTaskRequest(id=task_id)
                call = stub.SubscribeToTask(request, metadata=metadata)
        async for response in call:
            payload = MessageToDict(response)
            if not events:
                found = find_key(payload, "id")[0] if "task" in payload else ""
            assert not len(UnknownFieldSet(response)), "a field outside the A2A schema"
            events.append((None, summary(payload)))
            if kw.get("cut_after") is not None and len(events) >= kw["cut_after"]:
                call.cancel()
                break
    return events, found


async def stream_message(
    binding: str, version: str, url: str, start: int, cut_after: int
) -> tuple[list[Event], str]:
    """A streamed countdown message, dropped after *cut_after* events: (events, task id)."""
    if binding == "GRPC":
        return await _grpc(version, url, None, None, start=start, cut_after=cut_after)
    return await _http(binding, version, url, None, None, start=start, cut_after=cut_after)


async def resume(
    binding: str, version: str, url: str, task_id: str, last_id: str | None
) -> list[Event]:
    """The events of a subscription to *task_id* after *last_id* (to the end)."""
    if binding == "GRPC":
        return (await _grpc(version, url, task_id, last_id))[0]
    return (await _http(binding, version, url, task_id, last_id))[0]
