"""The wire audit's gRPC corpus: the calls of one service version (``lf.a2a.v1`` 1.0,
``a2a.v1`` 0.3), each failure's status code, ``google.rpc`` details and trailers."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format
from google.rpc import status_pb2

from tests.bindings._agent import GATES
from tests.bindings._grpc import stubs
from tests.interop._wire_corpus import (
    GUEST_KEY,
    KEY,
    QUOTA_KEY,
    Exchange,
    message,
    proto03_message,
)

#: the calls of the corpus that succeed; every other one is refused
SUCCEEDS = {
    "send",
    "send (module fails)",
    "stream",
    "extended card",
    "send (gated)",
    "cancel (running)",
}


async def grpc_corpus(address: str, version: str) -> list[Exchange]:
    """The gRPC calls of one service version; each answer's status, details and metadata."""
    cell = f"GRPC {version}"
    v03 = version == "0.3"
    out: list[Exchange] = []

    async def call(
        label: str,
        method: Callable[..., Any],
        request: Any,
        key: str | None = KEY,
        meta: tuple[tuple[str, str], ...] = (),
    ) -> Any:
        metadata = (("x-api-key", key),) if key else ()
        shown = f"{type(request).__name__} {json_format.MessageToJson(request, indent=None)}"
        exchange = Exchange(cell, label, shown[:300], "ok" if label in SUCCEEDS else "")
        rpc = method(request, metadata=metadata + meta)
        result: Any = None
        try:
            if isinstance(rpc, grpc.aio.UnaryStreamCall):
                result = [item async for item in rpc]
            else:
                result = await rpc
            exchange.grpc_ok = True
        except grpc.aio.AioRpcError as error:
            exchange.status = error.code().value[0]
            for key_, value in error.trailing_metadata() or ():
                if key_ == "grpc-status-details-bin":
                    status = status_pb2.Status.FromString(value)
                    exchange.grpc_details = [d.type_url for d in status.details]
        # What the server sent as metadata, before the answer and after it.
        for key_, _value in (
            *(await rpc.initial_metadata() or ()),
            *(await rpc.trailing_metadata() or ()),
        ):
            exchange.headers.append((key_, ""))
        out.append(exchange)
        return result

    def send03(skill: str, parts: list[dict[str, Any]], wait: bool = True) -> Any:
        body: dict[str, Any] = {"message": proto03_message(skill, parts)}
        if not wait:
            body["configuration"] = {"blocking": False}
        return json_format.ParseDict(body, pb03.SendMessageRequest())

    def send10(skill: str, parts: list[dict[str, Any]], wait: bool = True) -> Any:
        body: dict[str, Any] = {"message": message(skill, parts, False)}
        if not wait:
            body["configuration"] = {"returnImmediately": True}
        return json_format.ParseDict(body, pb.SendMessageRequest())

    make = send03 if v03 else send10
    async with stubs(address) as (stub10, stub03):
        stub = stub03 if v03 else stub10
        task = await call("send", stub.SendMessage, make("demo.echo", [{"text": "hi"}]))
        done = task.task.id
        await call("send (module fails)", stub.SendMessage, make("audit.fail", [{"text": "x"}]))
        await call("send (unknown skill)", stub.SendMessage, make("nope.none", [{"text": "x"}]))
        await call(
            "stream", stub.SendStreamingMessage, make("demo.countdown", [{"data": {"start": 2}}])
        )
        if v03:
            await call("get (unknown task)", stub.GetTask, pb03.GetTaskRequest(name="tasks/nope"))
            await call(
                "cancel (finished)", stub.CancelTask, pb03.CancelTaskRequest(name=f"tasks/{done}")
            )
            await call(
                "unauthenticated", stub.GetTask, pb03.GetTaskRequest(name=f"tasks/{done}"), key=None
            )
            await call(
                "forbidden", stub.GetTask, pb03.GetTaskRequest(name=f"tasks/{done}"), key=GUEST_KEY
            )
            await call("extended card", stub.GetAgentCard, pb03.GetAgentCardRequest())
        else:
            await call("get (unknown task)", stub.GetTask, pb.GetTaskRequest(id="nope"))
            await call("cancel (finished)", stub.CancelTask, pb.CancelTaskRequest(id=done))
            await call("unauthenticated", stub.GetTask, pb.GetTaskRequest(id=done), key=None)
            await call("forbidden", stub.GetTask, pb.GetTaskRequest(id=done), key=GUEST_KEY)
            await call(
                "wrong version",
                stub.GetTask,
                pb.GetTaskRequest(id=done),
                meta=(("a2a-version", "2.0"),),
            )
            await call("extended card", stub.GetExtendedAgentCard, pb.GetExtendedAgentCardRequest())
            await call("list (bad status)", stub.ListTasks, pb.ListTasksRequest(status=99))  # type: ignore[arg-type]
        gates = []
        for _ in range(2):
            gate = uuid.uuid4().hex
            answer = await call(
                "send (gated)",
                stub.SendMessage,
                make("demo.gate", [{"data": {"key": gate}}], False),
                key=QUOTA_KEY,
            )
            await GATES.wait_started(gate)
            gates.append((gate, answer.task.id))
        await call(
            "send (over the task quota)",
            stub.SendMessage,
            make("demo.gate", [{"data": {"key": "never"}}], False),
            key=QUOTA_KEY,
        )
        for gate, running in gates:
            request = (
                pb03.CancelTaskRequest(name=f"tasks/{running}")
                if v03
                else pb.CancelTaskRequest(id=running)
            )
            await call("cancel (running)", stub.CancelTask, request, key=QUOTA_KEY)
            GATES.release(gate)
    return out
