"""The wire audit's corpus: every A2A call, good and bad, sent raw on one binding x version
cell, each answer recorded as it left the agent (status, headers, body, SSE frames, gRPC
trailers) for ``test_wire_audit.py`` to judge. JSON-RPC here; REST in ``_wire_rest.py``,
gRPC in ``_wire_grpc.py``.

The agent runs with API keys (401 paths), push notifications, streaming, an extended card
and a task quota of two per caller (the ``quota`` key fills it with gated tasks).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel

from apcore_a2a import InputRequired
from tests.bindings._agent import GATES

KEY, QUOTA_KEY = "audit-key-robot-0001", "audit-key-quota-0001"
#: a valid key without the role the agent requires: 403
GUEST_KEY = "audit-key-guest-0001"
ROLE = "caller"
#: the webhook of the config the corpus deletes again (nothing is delivered to it)
UNUSED_HOOK = "http://127.0.0.1:9/hook"
V10 = {"A2A-Version": "1.0"}


class FailIn(BaseModel):
    text: str = ""


class Fail:
    """A module that fails: its task ends ``failed``."""

    input_schema = FailIn
    description = "Always fails"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        raise RuntimeError("the module broke at /srv/secret/path.py")


class Ask:
    """A module that asks the caller: its task ends the turn ``input-required``."""

    input_schema = FailIn
    description = "Asks for more"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        raise InputRequired("Say what?", field="text")


@dataclass
class Exchange:
    """One request and what came back, as the wire carried it."""

    cell: str
    label: str
    request: str
    expect: str  # the message type the spec names for a success ("" = none)
    status: int = 0  # HTTP status, or the gRPC status code's value
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: Any = None  # the parsed JSON body (HTTP), or None
    frames: list[list[tuple[str, str]]] = field(default_factory=list)  # SSE: (field, value)
    grpc_details: list[str] = field(default_factory=list)  # type URLs of the status details
    grpc_ok: bool = False


def sse_frames(text: str) -> list[list[tuple[str, str]]]:
    """Split an SSE body into frames of (field, value); a comment line's field is ``""``."""
    frames: list[list[tuple[str, str]]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [line for line in block.split("\n") if line]
        if lines:
            frames.append([(ln.partition(":")[0], ln.partition(":")[2].strip()) for ln in lines])
    return frames


class HttpCell:
    """Raw HTTP on one binding (``JSONRPC`` / ``REST``) and version (``1.0`` / ``0.3``)."""

    def __init__(
        self, url: str, binding: str, version: str, client: httpx.AsyncClient, hook: str
    ) -> None:
        self.url, self.binding, self.version, self.client = url, binding, version, client
        self.cell = f"{binding} {version}"
        #: the webhook of the push config whose deliveries the audit reads
        self.hook = hook
        self.exchanges: list[Exchange] = []

    def headers(self, key: str | None = KEY, version: str | None = None) -> dict[str, str]:
        out = {"A2A-Version": version or self.version} if self.version == "1.0" or version else {}
        if key is not None:
            out["X-API-Key"] = key
        return out

    async def http(
        self,
        label: str,
        method: str,
        path: str,
        expect: str,
        body: Any = None,
        *,
        key: str | None = KEY,
        version: str | None = None,
        raw: bytes | None = None,
        while_open: Callable[[], Awaitable[None]] | None = None,
    ) -> Exchange:
        """Send one request; record the answer (an SSE body read to its end, *while_open*
        awaited once its first event is in)."""
        content = raw if raw is not None else (json.dumps(body).encode() if body else None)
        headers = {**self.headers(key, version), "Content-Type": "application/json"}
        shown = f"{method} {path} {content[:300].decode(errors='replace') if content else ''}"
        exchange = Exchange(self.cell, label, shown, expect)
        request = self.client.build_request(
            method, self.url + path, content=content, headers=headers
        )
        response = await self.client.send(request, stream=True)
        try:
            exchange.status = response.status_code
            exchange.headers = [(k.decode(), v.decode()) for k, v in response.headers.raw]
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                chunks: list[str] = []
                async for chunk in response.aiter_text():
                    chunks.append(chunk)
                    if while_open is not None:
                        await while_open()
                        while_open = None
                exchange.frames = sse_frames("".join(chunks))
            else:
                data = await response.aread()
                try:
                    exchange.body = json.loads(data) if data else None
                except ValueError:
                    exchange.body = data.decode(errors="replace")
        finally:
            await response.aclose()
        self.exchanges.append(exchange)
        return exchange

    async def rpc(self, label: str, method: str, params: Any, expect: str, **kw: Any) -> Exchange:
        payload = {"jsonrpc": "2.0", "id": uuid.uuid4().hex[:8], "method": method, "params": params}
        return await self.http(label, "POST", "/", expect, payload, **kw)


def message(skill: str, parts: list[dict[str, Any]], v03: bool) -> dict[str, Any]:
    """A user message in the version's JSON shape."""
    if v03:
        return {
            "kind": "message",
            "messageId": uuid.uuid4().hex,
            "role": "user",
            "parts": [
                {"kind": "text", **p} if "text" in p else {"kind": "data", **p} for p in parts
            ],
            "metadata": {"skillId": skill},
        }
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": parts,
        "metadata": {"skillId": skill},
    }


def proto03_message(skill: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A 0.3 message in the 0.3 proto's JSON (REST 0.3 and gRPC 0.3)."""
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "content": [{"data": {"data": p["data"]}} if "data" in p else p for p in parts],
        "metadata": {"skillId": skill},
    }


def task_id_of(exchange: Exchange) -> str:
    """The task id in a send's answer (any binding's JSON)."""
    body = exchange.body or {}
    result = body.get("result", body)
    task = result.get("task", result)
    return str(task["id"])


async def gated(send: Callable[[str, str], Any], key: str = KEY) -> tuple[str, str]:
    """Start a gated task without waiting for it; return (gate key, task id)."""
    gate = uuid.uuid4().hex
    exchange = await send(gate, key)
    await GATES.wait_started(gate)
    return gate, task_id_of(exchange)


async def jsonrpc_corpus(cell: HttpCell) -> None:
    """Every JSON-RPC method of the cell's version, good and bad inputs."""
    v03 = cell.version == "0.3"
    name = {
        "send": "message/send" if v03 else "SendMessage",
        "stream": "message/stream" if v03 else "SendStreamingMessage",
        "get": "tasks/get" if v03 else "GetTask",
        "cancel": "tasks/cancel" if v03 else "CancelTask",
        "subscribe": "tasks/resubscribe" if v03 else "SubscribeToTask",
        "push_set": "tasks/pushNotificationConfig/set"
        if v03
        else "CreateTaskPushNotificationConfig",
        "push_get": "tasks/pushNotificationConfig/get" if v03 else "GetTaskPushNotificationConfig",
        "push_list": "tasks/pushNotificationConfig/list"
        if v03
        else "ListTaskPushNotificationConfigs",
        "push_delete": "tasks/pushNotificationConfig/delete"
        if v03
        else "DeleteTaskPushNotificationConfig",
        "card": "agent/getAuthenticatedExtendedCard" if v03 else "GetExtendedAgentCard",
    }

    def send_params(skill: str, parts: list[dict[str, Any]], wait: bool = True) -> dict[str, Any]:
        params: dict[str, Any] = {"message": message(skill, parts, v03)}
        if not wait:
            params["configuration"] = {"blocking": False} if v03 else {"returnImmediately": True}
        return params

    async def send_gate(gate: str, key: str, label: str = "send (gated)") -> Exchange:
        params = send_params("demo.gate", [{"data": {"key": gate}}], wait=False)
        expect = "" if "quota" in label else "SendMessageResponse"
        return await cell.rpc(label, name["send"], params, expect, key=key)

    ok = await cell.rpc(
        "send", name["send"], send_params("demo.echo", [{"text": "hi"}]), "SendMessageResponse"
    )
    done = task_id_of(ok)
    await cell.rpc(
        "send (bad input)",
        name["send"],
        send_params("demo.add", [{"data": {"a": "x"}}]),
        "",
    )
    await cell.rpc(
        "send (unknown skill)", name["send"], send_params("nope.none", [{"text": "x"}]), ""
    )
    await cell.rpc(
        "send (module fails)",
        name["send"],
        send_params("audit.fail", [{"text": "x"}]),
        "SendMessageResponse",
    )
    asked = await cell.rpc(
        "send (input-required)",
        name["send"],
        send_params("audit.ask", [{"text": "x"}]),
        "SendMessageResponse",
    )
    await cell.rpc(
        "send (no parts)", name["send"], {"message": {**message("demo.echo", [], v03)}}, ""
    )
    await cell.rpc("send (bad params)", name["send"], {"message": 5}, "")
    await cell.rpc(
        "stream",
        name["stream"],
        send_params("demo.countdown", [{"data": {"start": 2}}]),
        "StreamResponse",
    )
    await cell.rpc("get", name["get"], {"id": done, "historyLength": 1}, "Task")
    await cell.rpc("get (unknown task)", name["get"], {"id": uuid.uuid4().hex}, "")
    await cell.rpc("get (bad historyLength)", name["get"], {"id": done, "historyLength": "x"}, "")
    if not v03:
        await cell.rpc("list", "ListTasks", {"pageSize": 2}, "ListTasksResponse")
        await cell.rpc("list (bad status)", "ListTasks", {"status": 99}, "")
    await cell.rpc("cancel (input-required)", name["cancel"], {"id": task_id_of(asked)}, "Task")
    await cell.rpc("cancel (finished)", name["cancel"], {"id": done}, "")
    await cell.rpc("cancel (unknown task)", name["cancel"], {"id": uuid.uuid4().hex}, "")
    gate, running = await gated(send_gate)

    async def second_stream() -> None:
        # The caller holds its one stream: a second one is over its quota (429).
        label = "subscribe (over the stream quota)"
        await cell.rpc(label, name["subscribe"], {"id": running}, "")
        GATES.release(gate)

    await cell.rpc(
        "subscribe", name["subscribe"], {"id": running}, "StreamResponse", while_open=second_stream
    )
    await cell.rpc("subscribe (finished)", name["subscribe"], {"id": done}, "")
    gate, running = await gated(send_gate)

    def push_config(config_id: str, url: str) -> dict[str, Any]:
        config = {"id": config_id, "url": url, "token": "t0k"}
        return (
            {"taskId": running, "pushNotificationConfig": config}
            if v03
            else {"taskId": running, **config}
        )

    push_set = push_config("c1", cell.hook)
    await cell.rpc("push set", name["push_set"], push_set, "TaskPushNotificationConfig")
    get_params = (
        {"id": running, "pushNotificationConfigId": "c1"}
        if v03
        else {"taskId": running, "id": "c1"}
    )
    await cell.rpc("push get", name["push_get"], get_params, "TaskPushNotificationConfig")
    await cell.rpc(
        "push get (unknown task)",
        name["push_get"],
        {**get_params, ("id" if v03 else "taskId"): "nope"},
        "",
    )
    list_params = {"id": running} if v03 else {"taskId": running}
    await cell.rpc(
        "push list", name["push_list"], list_params, "ListTaskPushNotificationConfigsResponse"
    )
    unused = push_config("c2", UNUSED_HOOK)
    await cell.rpc("push set", name["push_set"], unused, "TaskPushNotificationConfig")
    c2 = (
        {"id": running, "pushNotificationConfigId": "c2"}
        if v03
        else {"taskId": running, "id": "c2"}
    )
    await cell.rpc("push delete", name["push_delete"], c2, "Empty")
    await cell.rpc(
        "push set (bad url)",
        name["push_set"],
        {
            **push_set,
            **({"pushNotificationConfig": {"url": "ftp://x"}} if v03 else {"url": "ftp://x"}),
        },
        "",
    )
    await cell.rpc("cancel (running)", name["cancel"], {"id": running}, "Task")
    GATES.release(gate)
    await cell.rpc("extended card", name["card"], {}, "AgentCard")
    await cell.rpc("unknown method", "tasks/frobnicate" if v03 else "Frobnicate", {}, "")
    await cell.rpc("wrong version", name["get"], {"id": done}, "", version="2.0")
    await cell.rpc("unauthenticated", name["get"], {"id": done}, "", key=None)
    await cell.rpc("bad key", name["get"], {"id": done}, "", key="wrong")
    await cell.rpc("forbidden", name["get"], {"id": done}, "", key=GUEST_KEY)
    await cell.http("not JSON", "POST", "/", "", raw=b"{nope")
    await cell.http("wrong HTTP method", "GET", "/", "")
    await cell.http("oversized", "POST", "/", "", raw=b'{"x": "' + b"a" * 70_000 + b'"}')
    gates = [await gated(send_gate, QUOTA_KEY) for _ in range(2)]
    await send_gate(uuid.uuid4().hex, QUOTA_KEY, "send (over the task quota)")
    for gate, running in gates:
        await cell.rpc("cancel (running)", name["cancel"], {"id": running}, "Task", key=QUOTA_KEY)
        GATES.release(gate)
