"""The agent the operations tests run: a few apcore modules and JSON-RPC helpers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from apcore import ModuleAnnotations, ModuleError, Registry
from pydantic import BaseModel, Field

from apcore_a2a import InputRequired

from .._modules import Add, Talk
from .._support import free_port

V1 = {"A2A-Version": "1.0"}


class TextIn(BaseModel):
    text: str = Field(max_length=100_000)


class TextOut(BaseModel):
    text: str


class Fail:
    """Fails with a custom apcore code; the message repeats the client's text."""

    input_schema = TextIn
    output_schema = TextOut
    description = "Always fails"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        raise ModuleError(code="OPS_BROKEN", message=f"cannot handle {inputs['text']}")


class SleepIn(BaseModel):
    seconds: float = Field(ge=0, le=60)


class SleepOut(BaseModel):
    slept: float


class Sleep:
    input_schema = SleepIn
    output_schema = SleepOut
    description = "Sleep, then answer"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        await asyncio.sleep(inputs["seconds"])
        return {"slept": inputs["seconds"]}


class GateIn(BaseModel):
    path: str = Field(description="File whose appearance lets the module finish")


class GateOut(BaseModel):
    released: bool


class AwaitFile:
    """Runs until the file at *path* exists (at most 60 s): a task the test ends at a
    moment it chooses, even in another process."""

    input_schema = GateIn
    output_schema = GateOut
    description = "Wait until a file exists"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        gate = Path(inputs["path"])
        for _ in range(3000):
            if gate.exists():
                return {"released": True}
            await asyncio.sleep(0.02)
        return {"released": False}


class AskOnFile(AwaitFile):
    """Runs until the file at *path* exists, then asks for input: a task that parks in
    ``input-required`` at a moment the test chooses (during a stop's drain)."""

    description = "Wait until a file exists, then ask"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        await super().execute(inputs, context)
        raise InputRequired("Which one?")


class ChunksIn(BaseModel):
    count: int = Field(ge=1, le=10_000)
    size: int = Field(ge=1, le=65_536, description="characters per chunk")
    path: str = Field(description="File whose appearance starts the stream")


class ChunksOut(BaseModel):
    model_config = {"extra": "allow"}


class Chunks:
    """Once the file at *path* exists (at most 60 s), streams *count* numbered chunks of
    *size* characters as fast as it can: a stream whose client stops reading fills the
    agent's send buffer."""

    input_schema = ChunksIn
    output_schema = ChunksOut
    description = "Stream numbered chunks"
    annotations = ModuleAnnotations(streaming=True, readonly=True)

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {}

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        await AwaitFile().execute(inputs, context)
        for n in range(inputs["count"]):
            yield {"kind": "text", "text": f"{n:06d}:".ljust(inputs["size"], "x")}
            await asyncio.sleep(0)


class Extra:
    """Registered at runtime by the live-registry tests."""

    input_schema = TextIn
    output_schema = TextOut
    description = "Shout the text"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"text": inputs["text"].upper()}


def build_registry(*, gated: bool = False) -> Registry:
    """The ops modules; *gated* adds ``ops.await_file``, ``ops.talk`` (a task parked in
    ``input-required``), ``ops.ask_on_file`` and ``ops.chunks`` for the shutdown tests."""
    registry = Registry()
    registry.register("ops.add", Add())
    registry.register("ops.fail", Fail())
    registry.register("ops.sleep", Sleep())
    if gated:
        registry.register("ops.await_file", AwaitFile())
        registry.register("ops.talk", Talk())
        registry.register("ops.ask_on_file", AskOnFile())
        registry.register("ops.chunks", Chunks())
    return registry


def message_params(
    skill: str, data: dict[str, Any], *, return_immediately: bool = False
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "message": {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"data": data}],
            "metadata": {"skillId": skill},
        }
    }
    if return_immediately:
        params["configuration"] = {"returnImmediately": True}
    return params


def streaming_body(skill: str, data: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC 1.0 ``SendStreamingMessage`` body calling *skill* with *data*."""
    params = message_params(skill, data)
    return {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params}


async def rpc(
    http: httpx.AsyncClient,
    method: str,
    params: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One JSON-RPC 1.0 call; returns the whole response object (result or error)."""
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
    response = await http.post("/", json=body, headers={**V1, **(headers or {})})
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()
    return payload


async def read_stream(
    http: httpx.AsyncClient, body: dict[str, Any], events: list[dict[str, Any]]
) -> None:
    """POST *body* (a 1.0 streaming call) and append each event it answers to *events*,
    as it comes, until the stream ends."""
    async with http.stream("POST", "/", json=body, headers=V1) as stream:
        async for line in stream.aiter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))


async def send(
    http: httpx.AsyncClient,
    skill: str,
    data: dict[str, Any],
    *,
    return_immediately: bool = False,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """SendMessage; returns the task (asserts the call did not fail)."""
    reply = await rpc(
        http,
        "SendMessage",
        message_params(skill, data, return_immediately=return_immediately),
        headers,
    )
    assert "result" in reply, reply
    task: dict[str, Any] = reply["result"]["task"]
    return task


async def wait_state(
    http: httpx.AsyncClient,
    task_id: str,
    states: set[str],
    timeout: float = 30.0,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Poll GetTask until the task is in one of *states*."""
    async with asyncio.timeout(timeout):
        while True:
            reply = await rpc(http, "GetTask", {"id": task_id}, headers)
            task: dict[str, Any] = reply["result"]
            if task["status"]["state"] in states:
                return task
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def served(
    registry: Any = None, **settings: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """The ops agent under real uvicorn on 127.0.0.1; yields an HTTP client and the app."""
    from apcore_a2a import A2AServerFactory

    from .._support import running_server

    port = free_port()
    app, _card = A2AServerFactory(
        registry if registry is not None else build_registry(),
        environ={},
        port=port,
        **settings,
    ).create()
    async with (
        running_server(app, port=port) as url,
        httpx.AsyncClient(base_url=url, timeout=20) as http,
    ):
        yield http, app
