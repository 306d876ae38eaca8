"""Spans named and dressed as the draft OpenTelemetry A2A conventions say.

Server spans seen through the official SDK clients on JSON-RPC, REST and gRPC, 1.0 and
0.3; client spans of ``A2AClient`` against the same server, joined to the server's trace.
Spans are read back with the OpenTelemetry SDK's in-memory exporter.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import grpc.aio
import pytest
from a2a.types import GetTaskRequest, a2a_pb2
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from apcore_a2a import A2AClient
from tests._sdk import make_client, request
from tests.ops.test_telemetry import spans  # noqa: F401 - the in-memory exporter fixture

from ._grpc import failure
from ._outputs_agent import ALL_TRANSPORTS, BINDINGS, send, serve_outputs
from ._peers import fetch_card

#: error.type of GetTask on an unknown task, per binding
NOT_FOUND = {"JSONRPC": "-32001", "HTTP+JSON": "404", "GRPC": "NOT_FOUND"}


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    """conftest's agent, with telemetry on."""
    with serve_outputs(telemetry=True) as url:
        yield url


async def _span(
    exporter: InMemorySpanExporter, name: str, kind: SpanKind, **having: Any
) -> ReadableSpan:
    """The one finished span called *name* of *kind* whose attributes include *having*."""
    async with asyncio.timeout(10):
        while True:
            found = [
                s
                for s in exporter.get_finished_spans()
                if s.name == name
                and s.kind == kind
                and all((s.attributes or {}).get(k) == v for k, v in having.items())
            ]
            if found:
                assert len(found) == 1, found
                return found[0]
            await asyncio.sleep(0.02)


@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_server_spans_follow_the_a2a_conventions(
    spans: InMemorySpanExporter,  # noqa: F811
    agent_url: str,
    binding: str,
    version: str,
) -> None:
    client = await make_client(agent_url, binding, version)
    message_id = uuid.uuid4().hex
    try:
        task = await send(client, request("out.trip", {"origin": "A"}, message_id=message_id))
        missing = uuid.uuid4().hex
        with pytest.raises(Exception):  # noqa: B017 - each SDK transport has its own type
            await client.get_task(GetTaskRequest(id=missing))
    finally:
        await client.close()
    sent = await _span(spans, "SendMessage", SpanKind.SERVER, **{"a2a.message.id": message_id})
    attributes = dict(sent.attributes or {})
    assert {k: v for k, v in attributes.items() if k.startswith(("a2a.", "gen_ai."))} == {
        "a2a.method.name": "SendMessage",
        "a2a.protocol.version": version,
        "a2a.message.id": message_id,
        "a2a.task.id": task.id,
        "a2a.task.state": "TASK_STATE_INPUT_REQUIRED",
        "gen_ai.conversation.id": task.context_id,
    }
    assert "error.type" not in attributes
    failed = await _span(spans, "GetTask", SpanKind.SERVER, **{"a2a.task.id": missing})
    assert failed.attributes is not None
    assert failed.attributes["error.type"] == NOT_FOUND[binding]
    assert failed.attributes["a2a.protocol.version"] == version
    # A caller's error is no fault of the server's: the same shape on every binding, status
    # unset (HTTP: a 4xx), no exception event (its message and frames are no attribute).
    assert failed.status.status_code == StatusCode.UNSET, failed.status
    assert not failed.events, [dict(e.attributes or {}) for e in failed.events]
    # The module span hangs below the request span and says which module ran.
    module = await _span(spans, "execute out.trip", SpanKind.INTERNAL, **{"a2a.task.id": task.id})
    assert module.context.trace_id == sent.context.trace_id
    assert module.attributes is not None
    assert module.attributes["apcore.module.id"] == "out.trip"
    assert module.attributes["a2a.task.state"] == "TASK_STATE_INPUT_REQUIRED"


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_a_stream_span_ends_with_the_last_state(
    spans: InMemorySpanExporter,  # noqa: F811
    agent_url: str,
    binding: str,
    version: str,
) -> None:
    client = await make_client(agent_url, binding, version, streaming=True)
    message_id = uuid.uuid4().hex
    try:
        events = [
            e async for e in client.send_message(request("out.story", {}, message_id=message_id))
        ]
    finally:
        await client.close()
    span = await _span(
        spans, "SendStreamingMessage", SpanKind.SERVER, **{"a2a.message.id": message_id}
    )
    assert span.attributes is not None
    assert span.attributes["a2a.task.id"] == events[0].task.id
    assert span.attributes["a2a.task.state"] == "TASK_STATE_COMPLETED"


def _nan_request() -> bytes:
    message = a2a_pb2.Message(message_id=uuid.uuid4().hex, role=a2a_pb2.ROLE_USER)
    message.parts.add(text="hi")
    message.metadata.update({"skillId": "out.trip", "n": float("nan")})
    return a2a_pb2.SendMessageRequest(message=message).SerializeToString()


@pytest.mark.parametrize("raw", [b"\xff" * 4, _nan_request()], ids=["corrupt", "nan"])
async def test_a_grpc_request_refused_for_its_shape_is_traced_as_refused(
    spans: InMemorySpanExporter,  # noqa: F811
    agent_url: str,
    raw: bytes,
) -> None:
    """A request that does not decode, or holds a number JSON cannot hold: its span reads
    what it can of the request (main: the span broke the call, UNKNOWN naming an
    ``AttributeError``, or a ``SerializeToJsonError``)."""
    card = await fetch_card(agent_url)
    address = next(i.url for i in card.supported_interfaces if i.protocol_binding == "GRPC")
    async with grpc.aio.insecure_channel(address) as channel:
        send = channel.unary_unary("/lf.a2a.v1.A2AService/SendMessage")
        refused = await failure(send(raw, metadata=[("a2a-version", "1.0")]))
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, refused
    span = await _span(spans, "SendMessage", SpanKind.SERVER)
    assert span.attributes is not None
    assert span.attributes["error.type"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_client_spans_follow_the_a2a_conventions(
    spans: InMemorySpanExporter,  # noqa: F811
    agent_url: str,
    version: str,
) -> None:
    async with A2AClient(agent_url, protocol=version) as client:  # type: ignore[arg-type]
        task = await client.send_message({"origin": "A"}, skill_id="out.trip")
        events = [e async for e in client.stream_message({}, skill_id="out.story")]
        with pytest.raises(Exception) as missing:
            await client.get_task("no-such-task")
    assert getattr(missing.value, "code", None) == -32001
    sent = await _span(spans, "SendMessage", SpanKind.CLIENT, **{"a2a.task.id": task["id"]})
    assert sent.attributes is not None
    assert sent.attributes["a2a.method.name"] == "SendMessage"
    assert sent.attributes["a2a.protocol.version"] == version
    assert sent.attributes["a2a.task.state"] == "TASK_STATE_INPUT_REQUIRED"
    assert sent.attributes["gen_ai.conversation.id"] == task["contextId"]
    assert sent.attributes["server.address"] == "127.0.0.1"
    assert isinstance(sent.attributes["a2a.message.id"], str)
    # The client's span is the parent of the server's (traceparent went out with it).
    server = await _span(spans, "SendMessage", SpanKind.SERVER, **{"a2a.task.id": task["id"]})
    assert server.parent is not None and server.parent.span_id == sent.context.span_id
    streamed = await _span(
        spans, "SendStreamingMessage", SpanKind.CLIENT, **{"a2a.task.id": events[0]["id"]}
    )
    assert streamed.attributes is not None
    assert streamed.attributes["a2a.task.state"] == "TASK_STATE_COMPLETED"
    failed = await _span(spans, "GetTask", SpanKind.CLIENT, **{"a2a.task.id": "no-such-task"})
    assert failed.attributes is not None and failed.attributes["error.type"] == "-32001"
