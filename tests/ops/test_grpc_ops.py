"""gRPC on par with HTTP: counted in /metrics, traced like HTTP calls, and a standard
``grpc.health.v1`` service that follows the task store like ``/health``."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest
from a2a.types import GetTaskRequest
from a2a.utils.errors import TaskNotFoundError
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from apcore_a2a.server.grpc import SERVICE_V0_3, SERVICE_V1
from tests._sdk import make_client, request

from .._postgres import PG_HOST, PG_PORT, pg_schema_url
from .._proxy import TcpProxy
from .._support import free_port
from ._agent import served
from .test_telemetry import spans  # noqa: F401 - the in-memory span exporter fixture

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def _check(address: str, service: str) -> Any:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return (await stub.Check(health_pb2.HealthCheckRequest(service=service))).status


async def test_grpc_health_follows_the_task_store() -> None:
    proxy = TcpProxy(PG_HOST, PG_PORT)
    await proxy.start()
    grpc_port = free_port()
    try:
        async with pg_schema_url() as pg_url:
            url = pg_url.replace(f"{PG_HOST}:{PG_PORT}", f"127.0.0.1:{proxy.port}")
            async with served(task_store=url, grpc_port=grpc_port) as (http, _app):
                address = f"127.0.0.1:{grpc_port}"
                for service in ("", SERVICE_V1, SERVICE_V0_3):
                    assert await _check(address, service) == SERVING
                with pytest.raises(grpc.aio.AioRpcError) as unknown:
                    await _check(address, "no.such.Service")
                assert unknown.value.code() == grpc.StatusCode.NOT_FOUND

                await proxy.stop()
                assert (await http.get("/health")).status_code == 503
                assert await _check(address, "") == NOT_SERVING
                assert await _check(address, SERVICE_V1) == NOT_SERVING

                await proxy.start()
                assert await _check(address, "") == SERVING
                assert (await http.get("/health")).status_code == 200
    finally:
        await proxy.stop()


async def test_grpc_calls_are_counted_and_traced(
    spans: InMemorySpanExporter,  # noqa: F811
) -> None:
    grpc_port = free_port()
    async with served(grpc_port=grpc_port, metrics=True, telemetry=True) as (http, _app):
        before = (await http.get("/metrics")).json()["total_requests"]
        base = str(http.base_url).rstrip("/")
        client = await make_client(base, "GRPC", "1.0")
        streamer = await make_client(base, "GRPC", "1.0", streaming=True)
        legacy = await make_client(base, "GRPC", "0.3")
        sent: list[list[Any]] = [[], [], []]
        try:
            async for item in client.send_message(request("ops.add", {"a": 1, "b": 2})):
                sent[0].append(item)
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=uuid.uuid4().hex))
            async for item in streamer.send_message(request("ops.add", {"a": 2, "b": 2})):
                sent[1].append(item)
            async for item in legacy.send_message(request("ops.add", {"a": 3, "b": 2})):
                sent[2].append(item)
        finally:
            for each in (client, streamer, legacy):
                await each.close()
        after = (await http.get("/metrics")).json()["total_requests"]
        assert after - before == 4
    names = {
        (s.name, s.attributes.get("a2a.method.name") if s.attributes else None)
        for s in spans.get_finished_spans()
    }
    assert ("SendMessage", "SendMessage") in names, names
    assert ("GetTask", "GetTask") in names, names
    # The module ran inside the gRPC call's span.
    by_name = {s.name: s for s in spans.get_finished_spans()}
    call, module = by_name["SendMessage"], by_name.get("execute ops.add")
    assert module is not None and module.parent is not None
    assert module.context.trace_id == call.context.trace_id
    # Each call's span names the task it answered and the last state it carried, on the
    # 1.0 and the 0.3 service, unary and streaming (read from the call's answer).
    assert len(sent[1]) > 1  # a stream of events, not one answer
    tasks = [items[0].task for items in sent]
    answered = {
        s.attributes.get("rpc.method"): dict(s.attributes)
        for s in spans.get_finished_spans()
        if s.attributes and s.attributes.get("rpc.system") == "grpc"
    }
    methods = {
        f"/{SERVICE_V1}/SendMessage": tasks[0],
        f"/{SERVICE_V1}/SendStreamingMessage": tasks[1],
        f"/{SERVICE_V0_3}/SendMessage": tasks[2],
    }
    for method, task in methods.items():
        attributes = answered[method]
        assert attributes["a2a.task.id"] == task.id, (method, attributes)
        assert attributes["gen_ai.conversation.id"] == task.context_id, (method, attributes)
        assert attributes["a2a.task.state"] == "TASK_STATE_COMPLETED", (method, attributes)
    missing = answered[f"/{SERVICE_V1}/GetTask"]
    assert missing["error.type"] == "NOT_FOUND" and "a2a.task.state" not in missing
