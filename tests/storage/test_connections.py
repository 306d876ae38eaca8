"""An agent counts the PostgreSQL connections it will hold before it serves.

Per process: the pool (``?pool_size=``, 20 by default), the writer's connection, the one
holding the process's lock on the schema and, in cluster mode with wake-ups, the listening
one; times the workers. Against every limit
(the server's ``max_connections`` less its reserved ones, the role's and the database's
``CONNECTION LIMIT``): one that cannot take them all refuses the start with one line
naming it, not found out under load. A pool that cannot get a connection later (another
client holds the role's) answers "store unavailable, retry", as ``/health`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from apcore_a2a.storage import StoreUnavailableError, open_stores
from tests._sdk import make_client, request

from .._postgres import (
    PG_DB,
    PG_HOST,
    PG_PORT,
    PG_USER,
    pg_database_url,
    pg_execute,
    pg_schema_url,
)
from .._support import TLS, cli, cli_server, free_port
from ._a2a import EXTENSIONS
from ._helpers import settings

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh schema's URL without ``?pool_size=``: these tests size the pool themselves."""
    with pg_schema_url(agents=2, pool_size=None) as url:
        yield url


async def test_a_pool_the_server_cannot_take_stops_the_start_with_one_line(pg_url: str) -> None:
    code, out, err = await cli(
        "serve",
        "--extensions-dir",
        "examples/extensions",
        "--task-store",
        f"{pg_url}&pool_size=500",
    )
    assert code == 3, (out, err)
    lines = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, err
    assert "1 worker(s) x 502 (pool 500 + writer + lock) = 502" in lines[0]
    assert "max_connections" in lines[0]
    assert "Traceback" not in err


async def test_the_workers_count_in_cluster_mode(pg_url: str) -> None:
    stores = open_stores(pg_url, settings(cluster=True, workers=8))
    with pytest.raises(
        StoreUnavailableError,
        match=r"8 worker\(s\) x 23 \(pool 20 \+ writer \+ listener \+ lock\) = 184",
    ):
        await stores.start()
    await stores.aclose()


async def test_a_pool_that_fits_starts(pg_url: str) -> None:
    stores = open_stores(f"{pg_url}&pool_size=4", settings(cluster=True, workers=2))
    await stores.start()
    await stores.ping()
    await stores.aclose()


def test_pool_size_must_be_a_small_whole_number() -> None:
    for bad in ("0", "x", "1001", "-1"):
        with pytest.raises(ValueError, match="pool_size must be a whole number"):
            open_stores(f"postgresql://u@h/db?pool_size={bad}", settings())


@contextlib.contextmanager
def _limited_role(limit: int) -> Iterator[tuple[str, str]]:
    """(store URL, role): a fresh schema used by a role with ``CONNECTION LIMIT`` *limit*."""
    role = f"apcore_a2a_lim_{uuid.uuid4().hex[:8]}"
    with pg_schema_url(pool_size=None) as url:
        schema = url.rsplit("schema=", 1)[1]
        pg_execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT {limit}")
        try:
            pg_execute(f"GRANT USAGE, CREATE ON SCHEMA {schema} TO {role}")
            yield url.replace(f"{PG_USER}@", f"{role}@", 1), role
        finally:
            pg_execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        f"WHERE usename = '{role}'")  # fmt: skip
            pg_execute(f"DROP OWNED BY {role}")
            pg_execute(f"DROP ROLE {role}")


async def test_a_role_limit_too_small_for_the_workers_refuses_the_start_in_one_line() -> None:
    with _limited_role(4) as (url, role):
        code, out, err = await cli(
            "serve", "--extensions-dir", EXTENSIONS, "--task-store", url,
            "--cluster", "--workers", "2", "--port", str(free_port()),
        )  # fmt: skip
    assert code == 3, (out, err)
    lines = {line for line in err.splitlines() if line.startswith("Error:")}
    assert len(lines) == 1, err  # each worker says the same, once
    (line,) = lines
    assert f"the CONNECTION LIMIT of role {role}" in line, line
    assert "2 worker(s) x 23 (pool 20 + writer + listener + lock) = 46" in line, line
    assert "4 allowed" in line and "fewer workers would" in line, line
    assert "Traceback" not in err


async def test_a_database_limit_is_counted_too() -> None:
    # The test's superuser passes database limits: a role of its own, owning the database.
    role = f"apcore_a2a_lim_{uuid.uuid4().hex[:8]}"
    pg_execute(f"CREATE ROLE {role} LOGIN")
    try:
        async with pg_database_url(pool_size=None) as url:
            name = url.rsplit("/", 1)[1]
            pg_execute(f"ALTER DATABASE {name} OWNER TO {role}")
            pg_execute(f"ALTER DATABASE {name} CONNECTION LIMIT 4")
            url = url.replace(f"{PG_USER}@", f"{role}@", 1)
            stores = open_stores(url, settings())
            with pytest.raises(StoreUnavailableError, match=f"CONNECTION LIMIT of database {name}"):
                await stores.start()
            await stores.aclose()
            fits = open_stores(f"{url}?pool_size=2", settings())  # + writer + lock
            await fits.start()
            await fits.aclose()
    finally:
        pg_execute(f"DROP ROLE {role}")


def _send() -> dict[str, Any]:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"a": 1, "b": 2}}],
        "metadata": {"skillId": "math.add"},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def _hog(role: str, held: list[asyncpg.Connection]) -> None:
    """Open connections as *role* until the server refuses one."""
    while True:
        try:
            held.append(
                await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=role, database=PG_DB)
            )
        except asyncpg.TooManyConnectionsError:
            return


@pytest.mark.parametrize("cluster", [False, True], ids=["single", "cluster"])
async def test_a_saturated_role_answers_store_unavailable_and_health_agrees(
    cluster: bool,
) -> None:
    with _limited_role(10) as (url, role):
        grpc_port = free_port()
        args = ["--extensions-dir", EXTENSIONS, "--task-store", f"{url}&pool_size=4",
                "--grpc-port", str(grpc_port), *(["--cluster"] if cluster else [])]  # fmt: skip
        held: list[asyncpg.Connection] = []
        with cli_server(args) as (base, _):
            async with httpx.AsyncClient(base_url=base, timeout=60, verify=TLS) as http:
                first = await http.post("/", json=_send(), headers={"A2A-Version": "1.0"})
                assert first.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
                # Another client takes every connection the role has left, and the agent
                # loses the ones it had (so it must open new ones).
                await _hog(role, held)
                mine = ",".join(str(c.get_server_pid()) for c in held)
                pg_execute(
                    f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                    f"usename = '{role}' AND pid NOT IN ({mine})"
                )
                await asyncio.sleep(0.5)
                await _hog(role, held)
                try:
                    answers = await asyncio.gather(
                        *(http.post("/", json=_send(), headers={"A2A-Version": "1.0"})
                          for _ in range(40))
                    )  # fmt: skip
                    codes = {a.json()["error"]["code"] for a in answers}
                    assert codes == {-32092}, [a.json() for a in answers][:3]
                    message = _send()["params"]
                    rest = await http.post(
                        "/message:send", json=message, headers={"A2A-Version": "1.0"}
                    )
                    assert rest.status_code == 503 and rest.headers["retry-after"] == "2"
                    health = await http.get("/health")
                    assert health.status_code == 503, health.text
                    client = await make_client(base, "GRPC", "1.0")
                    try:
                        with pytest.raises(Exception) as refused:
                            async for _ in client.send_message(
                                request("math.add", {"a": 1, "b": 2})
                            ):
                                pass
                        text = f"{refused.value} {refused.value.__cause__}"
                        assert "UNAVAILABLE" in text or "navailable" in text, text
                    finally:
                        await client.close()
                finally:
                    for conn in held:
                        await conn.close()
                again = await http.post("/", json=_send(), headers={"A2A-Version": "1.0"})
                assert again.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
                assert (await http.get("/health")).status_code == 200
