"""The HTTP metrics the OpenTelemetry ASGI middleware records (through the application's
global meter provider) get no series per value a client chooses."""

from __future__ import annotations

import pytest
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from ._agent import rpc, served

_READER = InMemoryMetricReader()
HOSTS = 300


@pytest.fixture
def reader() -> InMemoryMetricReader:
    # The application's global provider, as an operator sets it; set once per test process.
    provider = metrics.get_meter_provider()
    if not getattr(provider, "_apcore_a2a_test_reader", False):
        provider = MeterProvider(metric_readers=[_READER])
        provider._apcore_a2a_test_reader = True  # type: ignore[attr-defined]
        metrics.set_meter_provider(provider)
    return _READER


def _series(reader: InMemoryMetricReader, port: int) -> dict[str, list[dict[str, object]]]:
    """The points of each metric, of the server on *port* (earlier agents' stay listed)."""
    data = reader.get_metrics_data()
    found: dict[str, list[dict[str, object]]] = {}
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points = found.setdefault(metric.name, [])
                for point in metric.data.data_points:
                    attributes = dict(point.attributes or {})
                    if attributes.get("http.host") == f"127.0.0.1:{port}":
                        points.append(attributes)
    return found


async def test_distinct_host_headers_make_no_new_series(reader: InMemoryMetricReader) -> None:
    # Bound to every interface without a url, the agent answers any Host header; each of
    # HOSTS clients names another host.
    async with served(telemetry=True, host="0.0.0.0") as (http, _app):
        for i in range(HOSTS):
            reply = await rpc(http, "GetTask", {"id": "none"}, {"Host": f"h{i}.attacker.test"})
            assert reply["error"]["code"] == -32001
        series = _series(reader, http.base_url.port or 0)
    assert "http.server.duration" in series  # the middleware's metrics are still recorded
    for name, points in series.items():
        hosts = {str(p.get("http.server_name")) for p in points}
        assert not any("attacker" in host for host in hosts), (name, sorted(hosts)[:3])
        assert len(points) < 10, (name, len(points))
    duration = series["http.server.duration"][0]
    assert duration["http.method"] == "POST"
    assert duration["http.status_code"] == 200
