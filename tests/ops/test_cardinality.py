"""No caller makes a new metric series: every label of ``GET /metrics`` and of the
OpenTelemetry HTTP metrics comes from a bounded set, whatever method, path, tenant, skill
id or ``A2A-Version`` a caller sends, on JSON-RPC (1.0 and 0.3), REST and gRPC."""

from __future__ import annotations

import asyncio
import uuid

import grpc
import grpc.aio
import httpx
from a2a.types import a2a_pb2
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from .._support import free_port
from ._agent import V1, message_params, served
from .test_metrics import _prometheus
from .test_telemetry_metrics import reader  # noqa: F401 - the in-memory metric reader

#: distinct bogus values of each kind a caller sends: more than the agent has series (under
#: 40), so a label taken from what a caller sends shows as series added (500 sent 6,500
#: requests, a minute of CPU, to show the same)
DISTINCT = 50


def _otel_series(reader: InMemoryMetricReader, port: int) -> set[tuple[str, frozenset[object]]]:  # noqa: F811
    """Each (metric, attributes) point of the agent on *port* (by its socket's address)."""
    data = reader.get_metrics_data()
    found: set[tuple[str, frozenset[object]]] = set()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    attributes = dict(point.attributes or {})
                    if attributes.get("http.host") == f"127.0.0.1:{port}":
                        found.add((metric.name, frozenset(attributes.items())))
    return found


async def _bogus_http(http: httpx.AsyncClient, i: int) -> None:
    """One request of each kind, each naming its own bogus value *i*."""
    bogus = f"x{i}-{uuid.uuid4().hex[:6]}"
    sends = [
        # an unknown JSON-RPC method, 1.0 and 0.3
        http.post("/", json={"jsonrpc": "2.0", "id": i, "method": bogus, "params": {}}, headers=V1),
        http.post("/", json={"jsonrpc": "2.0", "id": i, "method": f"{bogus}/x", "params": {}}),
        # an unknown skill, JSON-RPC and REST
        http.post(
            "/",
            json={
                "jsonrpc": "2.0",
                "id": i,
                "method": "SendMessage",
                "params": message_params(bogus, {}),
            },
            headers=V1,
        ),
        http.post("/message:send", json=message_params(bogus, {}), headers=V1),
        # a REST path no route takes, a task no one has, a tenant of the caller's choice
        http.get(f"/{bogus}/{bogus}/{bogus}", headers=V1),
        http.get(f"/tasks/{bogus}", headers=V1),
        http.get(f"/{bogus}/tasks/{bogus}", headers=V1),
        http.post(
            f"/{bogus}/message:send", json=message_params("ops.add", {"a": 1, "b": 2}), headers=V1
        ),
        # a version no one speaks
        http.post(
            "/",
            json={"jsonrpc": "2.0", "id": i, "method": "GetTask", "params": {"id": "t"}},
            headers={"A2A-Version": f"{i}.{i}"},
        ),
        http.get("/tasks/t", headers={"A2A-Version": f"9.{i}"}),
    ]
    for reply in await asyncio.gather(*sends):
        assert reply.status_code < 500, (reply.request.url, reply.text)


async def _bogus_grpc(channel: grpc.aio.Channel, i: int) -> None:
    bogus = f"x{i}-{uuid.uuid4().hex[:6]}"
    message = a2a_pb2.Message(message_id=bogus, role=a2a_pb2.ROLE_USER)
    message.parts.add(text="hi")
    message.metadata.update({"skillId": bogus})
    send = channel.unary_unary("/lf.a2a.v1.A2AService/SendMessage")
    calls = [
        channel.unary_unary(f"/lf.a2a.v1.A2AService/{bogus}")(
            b"", metadata=[("a2a-version", "1.0")]
        ),
        send(
            a2a_pb2.SendMessageRequest(message=message).SerializeToString(),
            metadata=[("a2a-version", "1.0")],
        ),
        send(b"", metadata=[("a2a-version", f"{i}.{i}")]),
    ]
    for outcome in await asyncio.gather(*calls, return_exceptions=True):
        assert isinstance(outcome, grpc.aio.AioRpcError), outcome
        assert outcome.code() not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)


async def test_bogus_values_make_no_new_series(reader: InMemoryMetricReader) -> None:  # noqa: F811
    grpc_port = free_port()
    async with served(metrics=True, telemetry=True, grpc_port=grpc_port) as (http, _app):
        port = http.base_url.port or 0
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            # every kind of request once, so that each series that may exist does
            await _bogus_http(http, -1)
            await _bogus_grpc(channel, -1)
            first = await _prometheus(http, headers={"Accept": "text/plain"})
            otel_first = _otel_series(reader, port)
            for i in range(DISTINCT):
                await _bogus_http(http, i)
                await _bogus_grpc(channel, i)
        last = await _prometheus(http, headers={"Accept": "text/plain"})
        otel_last = _otel_series(reader, port)
    assert set(last) == set(first), sorted(set(last) - set(first))[:5]
    assert last[("apcore_a2a_requests_total", ())] > DISTINCT * 10
    added = otel_last - otel_first
    assert not added, sorted(added, key=str)[:3]
    assert len(otel_last) < 40, len(otel_last)


async def test_the_route_of_a_tenant_request_is_its_template(
    reader: InMemoryMetricReader,  # noqa: F811
) -> None:
    # The duration is recorded once the request has left its route: the route is still named.
    async with served(telemetry=True) as (http, _app):
        for tenant in ("acme", "beta"):
            answer = await http.get(f"/{tenant}/tasks/{uuid.uuid4().hex}", headers=V1)
            assert answer.status_code == 404
        routes = {
            dict(points).get("http.target")
            for name, points in _otel_series(reader, http.base_url.port or 0)
            if name == "http.server.duration"
        }
    assert routes == {"/{tenant}/tasks/{id}"}, routes
