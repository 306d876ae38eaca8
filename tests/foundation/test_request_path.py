"""What the request path promises beyond the per-route checks (issues 17 and 18).

* A foreign ``Host`` is refused (DNS rebinding): 400, before anything runs.
* An error inside an SSE stream is scrubbed like any other: no exception text.
* A task-store object is used as given, even while it is empty (an empty store is falsy).
* An anonymous ``/health`` says healthy or unhealthy, never where the database is.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Task
from apcore import Identity

from apcore_a2a import A2AServerFactory
from apcore_a2a.auth import APIKeyAuthenticator
from apcore_a2a.storage import BoundedMemoryTaskStore
from tests._postgres import PG_HOST, PG_PORT, pg_schema_url
from tests._proxy import TcpProxy
from tests._support import TLS, running_server, send_message
from tests.foundation.modules import build_registry

SEND = send_message("math.add", {"a": 1, "b": 2})
V1 = {"A2A-Version": "1.0"}


async def test_a_foreign_host_header_is_refused() -> None:
    app, _card = A2AServerFactory(build_registry(), environ={}).create()
    async with running_server(app) as url, httpx.AsyncClient(base_url=url, verify=TLS) as http:
        ours = await http.post("/", json=SEND, headers=V1)
        assert ours.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        for host in ("evil.example", "attacker.example:8000", "192.168.1.5"):
            foreign = await http.post("/", json=SEND, headers={**V1, "Host": host})
            assert foreign.status_code == 400, host
        assert (await http.get("/health", headers={"Host": "localhost"})).status_code == 200


async def test_allowed_hosts_setting_replaces_the_default_but_loopback_is_answered() -> None:
    """A listed name is answered and any other name refused; the loopback names are
    answered too, so a probe on the agent's own machine (the image's HEALTHCHECK) works."""
    app, _card = A2AServerFactory(
        build_registry(), environ={}, allowed_hosts=["agents.example"]
    ).create()
    async with running_server(app) as url, httpx.AsyncClient(base_url=url, verify=TLS) as http:
        port = url.rsplit(":", 1)[1]
        for host in ("agents.example", f"127.0.0.1:{port}", "localhost", f"[::1]:{port}"):
            assert (await http.get("/health", headers={"Host": host})).status_code == 200, host
        called = await http.post("/", json=SEND, headers={**V1, "Host": f"localhost:{port}"})
        assert called.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        for host in ("evil.example", "127.0.0.1.evil.example", "localhost.evil.example"):
            assert (await http.get("/health", headers={"Host": host})).status_code == 400, host
            refused = await http.post("/", json=SEND, headers={**V1, "Host": host})
            assert refused.status_code == 400, host


class _FailingStore(InMemoryTaskStore):
    """Saves the first state, then fails the way a lost database connection does."""

    def __init__(self) -> None:
        super().__init__()
        self.saves = 0

    async def save(self, task: Task, context: ServerCallContext | None = None) -> None:
        self.saves += 1
        if self.saves > 1:
            raise ConnectionRefusedError(
                111, "Connect call failed ('10.0.0.5', 5432) user=agent db=/srv/secret/db"
            )
        await super().save(task, context)  # type: ignore[arg-type]


async def test_an_error_inside_a_stream_is_scrubbed() -> None:
    app, _card = A2AServerFactory(build_registry(), environ={}, task_store=_FailingStore()).create()
    body = {**SEND, "method": "SendStreamingMessage"}
    async with (
        running_server(app) as url,
        httpx.AsyncClient(base_url=url, verify=TLS) as http,
        http.stream("POST", "/", json=body, headers=V1) as response,
    ):
        text = (await response.aread()).decode()
    frames = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    errors = [f["error"] for f in frames if "error" in f]
    assert errors, text
    for error in errors:
        assert error == {"code": -32603, "message": "Internal error"}, error
    for leak in ("Errno", "10.0.0.5", "5432", "/srv/secret", "Connect call failed"):
        assert leak not in text


@pytest.mark.parametrize("store", [BoundedMemoryTaskStore(max_capacity=5), InMemoryTaskStore()])
async def test_a_task_store_object_is_used_even_while_empty(store: Any) -> None:
    app, _card = A2AServerFactory(build_registry(), environ={}, task_store=store).create()
    async with running_server(app) as url, httpx.AsyncClient(base_url=url, verify=TLS) as http:
        reply = (await http.post("/", json=SEND, headers=V1)).json()
    task_id = reply["result"]["task"]["id"]
    assert await store.get(task_id, ServerCallContext()) is not None


async def test_anonymous_health_names_no_database_while_it_is_down() -> None:
    async with pg_schema_url() as url:
        proxy = TcpProxy(PG_HOST, PG_PORT)
        await proxy.start()
        proxied = url.replace(f"{PG_HOST}:{PG_PORT}", f"127.0.0.1:{proxy.port}")
        app, _card = A2AServerFactory(
            build_registry(),
            environ={},
            task_store=proxied,
            auth=APIKeyAuthenticator(
                {"ops-key-123456789": Identity(id="ops", roles=("operator",))}
            ),
        ).create()
        try:
            async with (
                running_server(app) as base,
                httpx.AsyncClient(base_url=base, verify=TLS) as http,
            ):
                assert (await http.get("/health")).json() == {"status": "healthy"}
                await proxy.stop()
                down = await http.get("/health")
                assert (down.status_code, down.json()) == (503, {"status": "unhealthy"})
                detailed = await http.get("/health", headers={"X-API-Key": "ops-key-123456789"})
                assert detailed.status_code == 503
                assert "unreachable" in detailed.json()["reason"]
        finally:
            await proxy.stop()


@pytest.mark.parametrize("verb", ["GET", "HEAD", "POST", "PUT", "DELETE"])
def test_each_request_is_recorded_as_its_route_was_described(verb: str) -> None:
    """The per-request record (``RequestInfo.again``) is the route's description with the
    request's shape limits, nothing else: what ``dataclasses.replace`` made before."""
    import dataclasses

    from apcore_a2a.classify import describe, hidden_routes
    from apcore_a2a.shape import Shape

    shape = Shape(max_depth=7)
    for path in [*hidden_routes("", rpc_path="/rpc"), "/explorer", "/explorer/app.js"]:
        route = describe(path, verb, rpc_path="/rpc", explorer_prefix="/explorer")
        assert route.again(shape) == dataclasses.replace(route, shape=shape), (path, verb)
