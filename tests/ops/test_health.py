"""``GET /health``: liveness with module count, uptime and version; 503 when the store is sick."""

from __future__ import annotations

import asyncio
import time

import httpx

from apcore_a2a import __version__

from .._proxy import TcpProxy
from ..storage.conftest import PG_HOST, PG_PORT, pg_schema_url
from ._agent import Extra, build_registry, send, served, wait_state
from ._proc import serve_process


async def test_healthy_document() -> None:
    registry = build_registry()
    async with served(registry) as (http, _app):
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


async def test_health_answers_within_a_second_while_the_agent_is_busy() -> None:
    # The agent runs in its own process, so the load generator here does not share its
    # event loop; shutdown_timeout=0 cancels the sleeping tasks at the end.
    with serve_process(shutdown_timeout=0) as (url, _proc):
        async with httpx.AsyncClient(base_url=url, timeout=20) as http:
            tasks = await asyncio.gather(
                *(
                    send(http, "ops.sleep", {"seconds": 5}, return_immediately=True)
                    for _ in range(30)
                )
            )
            await wait_state(http, tasks[-1]["id"], {"TASK_STATE_WORKING"})
            burst = [
                asyncio.ensure_future(send(http, "ops.add", {"a": i, "b": i})) for i in range(20)
            ]
            slowest = 0.0
            for _ in range(5):
                started = time.monotonic()
                probe = await http.get("/health")
                slowest = max(slowest, time.monotonic() - started)
                assert probe.status_code == 200
                assert probe.json()["status"] == "healthy"
            completed = await asyncio.gather(*burst)
            metrics_free = [t["status"]["state"] for t in completed]
            assert metrics_free == ["TASK_STATE_COMPLETED"] * 20
            assert slowest < 1.0, slowest


async def test_postgres_that_hangs_or_is_gone_makes_health_503_within_a_second() -> None:
    with pg_schema_url() as url:
        proxy = TcpProxy(PG_HOST, PG_PORT)
        await proxy.start()
        proxied = url.replace(f"{PG_HOST}:{PG_PORT}", f"127.0.0.1:{proxy.port}")
        try:
            async with served(task_store=proxied) as (http, _app):
                assert (await http.get("/health")).status_code == 200

                proxy.freeze()
                started = time.monotonic()
                hung = await asyncio.gather(*(http.get("/health") for _ in range(8)))
                assert time.monotonic() - started < 1.0
                for response in hung:
                    assert response.status_code == 503
                    assert response.json()["status"] == "unhealthy"
                    assert "did not answer" in response.json()["reason"]

                proxy.thaw()
                await _until_status(http, 200)

                await proxy.stop()
                down = await _until_status(http, 503)
                assert down.json()["status"] == "unhealthy"
                assert "unreachable" in down.json()["reason"]
        finally:
            await proxy.stop()


async def _until_status(http: httpx.AsyncClient, status: int) -> httpx.Response:
    async with asyncio.timeout(10):
        while (response := await http.get("/health")).status_code != status:
            await asyncio.sleep(0.05)
    return response
