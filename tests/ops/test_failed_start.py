"""An agent whose start fails in a host's process (its gRPC port taken, under the host's
own uvicorn) leaves nothing of it running there: the store's loops stopped, its sessions
closed, its replica marked dead for the cluster. Before, what had started stayed: the heartbeat
went on beating (the other replicas took the replica for live, and its claims for taken),
its lock and LISTEN sessions stayed open, the gRPC health probe kept polling the store, and
the SDK's loggers kept the agent's filters."""

from __future__ import annotations

import asyncio
import socket
from urllib.parse import parse_qs, urlsplit

import asyncpg
import pytest
import uvicorn

from apcore_a2a import async_serve

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import free_port
from ._agent import build_registry


async def test_a_start_that_fails_leaves_nothing_of_the_agent_running() -> None:
    with socket.socket() as taken, pg_schema_url() as url:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        schema = parse_qs(urlsplit(url).query)["schema"][0]
        before = asyncio.all_tasks()
        app = async_serve(
            build_registry(), task_store=url, cluster=True, grpc_port=taken.getsockname()[1]
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
        with pytest.raises(SystemExit):  # uvicorn's exit on a failed start-up
            await uvicorn.Server(config).serve()
        left = [t.get_name() for t in asyncio.all_tasks() - before if not t.done()]
        assert left == []
        conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
        try:
            sessions = await conn.fetch(
                "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE $1",
                f"apcore-a2a % {schema}",
            )
            live = f"SELECT count(*) FROM {schema}.apcore_a2a_replicas WHERE heartbeat_at > 0"
            replicas = await conn.fetchval(live)
        finally:
            await conn.close()
        assert [s[0] for s in sessions] == []
        assert replicas == 0
