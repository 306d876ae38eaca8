"""``/health`` follows the database: 503 while PostgreSQL is unreachable, 200 once it is back."""

from __future__ import annotations

import httpx
from apcore import Registry

from apcore_a2a import A2AServerFactory

from .._modules import Add
from .._postgres import PG_HOST, PG_PASSWORD, PG_PORT, PG_USER
from .._proxy import TcpProxy
from .._support import TLS, running_server


async def test_health_tracks_postgres_without_a_restart(pg_url: str) -> None:
    proxy = TcpProxy(PG_HOST, PG_PORT)
    await proxy.start()
    url = pg_url.replace(
        f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}",
        f"postgresql://{PG_USER}:{PG_PASSWORD}@127.0.0.1:{proxy.port}",
    )
    registry = Registry()
    registry.register("demo.add", Add())
    # The reason is a detail: shown to anonymous callers only with ops_details_public.
    app, _ = A2AServerFactory(registry, task_store=url, ops_details_public=True).create()
    try:
        async with (
            running_server(app) as base,
            httpx.AsyncClient(base_url=base, verify=TLS) as http,
        ):
            healthy = await http.get("/health")
            assert healthy.status_code == 200

            await proxy.stop()
            down = await http.get("/health")
            assert down.status_code == 503
            body = down.json()
            assert body["status"] == "unhealthy"
            assert "unreachable" in body["reason"]
            assert f":{PG_PASSWORD}@" not in body["reason"]

            await proxy.start()
            back = await http.get("/health")
            assert back.status_code == 200
    finally:
        await proxy.stop()
