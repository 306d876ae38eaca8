"""``GET /health``: liveness with module count, uptime and version; 503 when the store is sick."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from apcore_a2a import A2AServerFactory, __version__
from apcore_a2a.ops.operations import HEALTH_TIMEOUT

from .._postgres import PG_HOST, PG_PORT, pg_schema_url
from .._proxy import TcpProxy
from .._support import TLS, free_port, running_server
from ._agent import Extra, build_registry, send, served, wait_state
from ._proc import serve_process


async def test_anonymous_probes_learn_only_healthy_or_not() -> None:
    async with served() as (http, _app):
        brief = await http.get("/health")
        assert (brief.status_code, brief.json()) == (200, {"status": "healthy"})
    async with served(api_keys=("secret-key",)) as (http, _app):
        assert (await http.get("/health")).json() == {"status": "healthy"}
        # Credentials alone do not show details: those are for operators (see
        # tests/auth/test_least_detail.py).
        caller = await http.get("/health", headers={"X-API-Key": "secret-key"})
        assert caller.json() == {"status": "healthy"}


async def test_healthy_document() -> None:
    registry = build_registry()
    async with served(registry, ops_details_public=True) as (http, _app):
        first = await http.get("/health")
        assert first.status_code == 200
        assert first.headers["cache-control"] == "no-store"
        body = first.json()
        assert set(body) == {"status", "module_count", "uptime_seconds", "version"}
        assert body["status"] == "healthy"
        assert body["module_count"] == 3
        assert body["version"] == __version__
        await asyncio.sleep(0.05)
        later = (await http.get("/health")).json()
        assert later["uptime_seconds"] > body["uptime_seconds"] >= 0

        registry.register("ops.extra", Extra())
        assert (await http.get("/health")).json()["module_count"] == 4
        registry.unregister("ops.extra")
        assert (await http.get("/health")).json()["module_count"] == 3


async def test_health_needs_no_credentials() -> None:
    async with served(api_keys=("secret-key",)) as (http, _app):
        denied = await http.post(
            "/", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
        )
        assert denied.status_code == 401
        health = await http.get("/health")
        assert health.status_code == 200
        assert health.json()["status"] == "healthy"
        # a wrong key on the health probe is not an error either
        probed = await http.get("/health", headers={"X-API-Key": "wrong"})
        assert probed.status_code == 200


async def test_health_answers_while_the_agent_is_busy() -> None:
    # The agent runs in its own process, so the load generator here does not share its
    # event loop; shutdown_timeout=0 cancels the sleeping tasks at the end.
    with serve_process(shutdown_timeout=0) as (url, _proc):
        async with httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http:
            sleepers = await asyncio.gather(
                *(
                    send(http, "ops.sleep", {"seconds": 60}, return_immediately=True)
                    for _ in range(30)
                )
            )
            for task in sleepers:
                await wait_state(http, task["id"], {"TASK_STATE_WORKING"})
            burst = [
                asyncio.ensure_future(send(http, "ops.add", {"a": i, "b": i})) for i in range(20)
            ]
            probes = [await http.get("/health") for _ in range(5)]
            completed = await asyncio.gather(*burst)
            # Every probe answered healthy while all 30 tasks were still running: the
            # probe does not wait for the agent's work (order, not a stopwatch).
            states = [
                (await wait_state(http, t["id"], {"TASK_STATE_WORKING"}))["status"]["state"]
                for t in sleepers
            ]
    assert [(p.status_code, p.json()["status"]) for p in probes] == [(200, "healthy")] * 5
    assert [t["status"]["state"] for t in completed] == ["TASK_STATE_COMPLETED"] * 20
    assert states == ["TASK_STATE_WORKING"] * 30


async def test_a_held_up_event_loop_does_not_make_a_healthy_store_look_sick() -> None:
    # Something else in the process holds the event loop for longer than HEALTH_TIMEOUT
    # just after a probe asked the store (a blocking call in the host app; a machine so
    # busy the process does not run): the store's answer and the probe's timer come due
    # in the same turn. The store answered: healthy. (It used to answer 503, "did not
    # answer within 0.8 s", on the memory store, which cannot fail.)
    port = free_port()
    agent, _card = A2AServerFactory(build_registry(), environ={}, port=port).create()

    async def host(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/health":
            asyncio.get_running_loop().call_soon(time.sleep, HEALTH_TIMEOUT + 0.2)
        await agent(scope, receive, send)

    async with (
        running_server(host, port=port) as url,
        httpx.AsyncClient(base_url=url, timeout=20, verify=TLS) as http,
    ):
        probes = [await http.get("/health") for _ in range(3)]
    assert [(p.status_code, p.json()) for p in probes] == [(200, {"status": "healthy"})] * 3


async def test_postgres_that_hangs_or_is_gone_makes_health_503_at_once() -> None:
    async with pg_schema_url() as url:
        proxy = TcpProxy(PG_HOST, PG_PORT)
        await proxy.start()
        proxied = url.replace(f"{PG_HOST}:{PG_PORT}", f"127.0.0.1:{proxy.port}")
        try:
            async with served(task_store=proxied, ops_details_public=True) as (http, app):
                assert (await http.get("/health")).status_code == 200

                stores = app.state.a2a.stores
                real_ping = stores.ping
                pings = 0

                async def counted_ping() -> None:
                    nonlocal pings
                    pings += 1
                    await real_ping()

                stores.ping = counted_ping
                proxy.freeze()
                hung = await asyncio.gather(*(http.get("/health") for _ in range(8)))
                for response in hung:
                    assert response.status_code == 503
                    assert response.json()["status"] == "unhealthy"
                    # each probe gave up after HEALTH_TIMEOUT, before the store's own
                    # ping timeout could end the query with "unreachable"
                    assert response.json()["reason"] == (
                        f"task store did not answer within {HEALTH_TIMEOUT} s"
                    )
                # probes that arrive together share one store query: none queued behind
                # another, and the hung database got one query, not eight
                assert pings == 1

                proxy.thaw()
                await _until_status(http, 200)

                await proxy.stop()
                down = await _until_status(http, 503)
                assert down.json()["status"] == "unhealthy"
                assert "unreachable" in down.json()["reason"]
        finally:
            await proxy.stop()


async def _until_status(http: httpx.AsyncClient, status: int) -> httpx.Response:
    async with asyncio.timeout(30):
        while (response := await http.get("/health")).status_code != status:
            await asyncio.sleep(0.05)
    return response
