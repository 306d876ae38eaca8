"""Long streamed outputs in cluster mode: stored once, readable everywhere, never lost.

``probe.chunks`` streams numbered text chunks from replica A. While it runs, B shows every
chunk stored so far (``GetTask``, ``ListTasks``); the store grows with the output, not
with its square; a replica killed mid-stream loses no chunk a client saw, and the stream
goes on from B with ``Last-Event-ID``.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apcore_a2a.storage import INTERRUPTED_MESSAGE
from benchmarks.growth import sqlite_bytes, sqlite_frames_kept

from .._postgres import cannot_run, pg_database_url, pg_schema_url, store_url
from .._support import TLS, ServerProcess, cli_server, sse_frames
from .test_cluster_write_path_e2e import FAST, _rpc
from .test_write_path_e2e import V1, _body, _sql

PROBES = str(Path(__file__).resolve().parent / "probes")


@contextlib.contextmanager
def _replica(url: str) -> Iterator[tuple[str, ServerProcess]]:
    args = ["--extensions-dir", PROBES, "--task-store", url, "--cluster", "--log-level", "warning"]
    with cli_server(args, env=FAST) as replica:
        yield replica


@pytest.fixture(params=["sqlite", "postgresql"])
def cluster_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path, agents=2) as url:
        yield url


def _stream_body(count: int, size: int, delay: float) -> dict[str, Any]:
    body = _body("probe.chunks", {"count": count, "size": size, "delay": delay})
    body["method"] = "SendStreamingMessage"
    return body


def _texts(task: dict[str, Any]) -> list[str]:
    """The text parts of the task's one artifact (none yet: empty)."""
    artifacts = task.get("artifacts", [])
    return [part["text"] for part in artifacts[0]["parts"]] if artifacts else []


async def _get(http: httpx.AsyncClient, base: str, task_id: str) -> dict[str, Any]:
    reply = (await http.post(base + "/", json=_rpc("GetTask", id=task_id))).json()
    return dict(reply["result"])


async def test_the_other_replica_shows_every_chunk_stored_so_far(cluster_url: str) -> None:
    with _replica(cluster_url) as (a, _), _replica(cluster_url) as (b, _):
        async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
            seen: list[str] = []
            task_id, final = "", None
            body = _stream_body(count=40, size=64, delay=0.02)
            async with http.stream("POST", a + "/", json=body) as response:
                async for _id, payload in sse_frames(response):
                    result = payload["result"]
                    if "task" in result:
                        task_id = result["task"]["id"]
                    elif "artifactUpdate" in result:
                        seen += [p["text"] for p in result["artifactUpdate"]["artifact"]["parts"]]
                        if len(seen) % 10 == 0:
                            # Every chunk a client got is stored: B shows at least those.
                            task = await _get(http, b, task_id)
                            assert _texts(task)[: len(seen)] == seen
                            listed = await http.post(
                                b + "/", json=_rpc("ListTasks", includeArtifacts=True)
                            )
                            [entry] = listed.json()["result"]["tasks"]
                            assert _texts(entry)[: len(seen)] == seen
                            assert "metadata" not in entry["artifacts"][0]
                            # The task row is the SDK's, with no mark of ours in it: the
                            # streamed artifact is stored without parts.
                            [[row]] = await _sql(cluster_url, "SELECT artifacts FROM tasks")
                            assert "apcore" not in str(row), row
                    elif "statusUpdate" in result:
                        final = result["statusUpdate"]["status"]
            assert len(seen) == 40 and [t[:6] for t in seen] == [f"{n:06d}" for n in range(40)]
            assert final is not None and final["state"] == "TASK_STATE_COMPLETED"
            # The text is in the artifact: the final status does not send it again.
            assert "message" not in final
            for base in (a, b):
                task = await _get(http, base, task_id)
                assert task["status"]["state"] == "TASK_STATE_COMPLETED"
                assert _texts(task) == seen
                assert "metadata" not in task["artifacts"][0]


#: 1,000 chunks of 10,000 characters (10 MB): issue 43's stream
GROWTH_CHUNKS, GROWTH_SIZE = 1000, 10_000
#: bytes written per byte of output at most (PostgreSQL: table growth, and WAL; SQLite:
#: database file and WAL, whose frames are whole pages): one copy as events, one in the
#: settled row, page and TOAST rounding. Rewriting the task at each chunk: 100s of times.
BOUNDS = {"postgresql": 3.0, "sqlite": 5.0}


async def _stream_until_killed(base: str, proc: ServerProcess) -> tuple[list[str], str, str]:
    """Stream 2,000 chunks from *base* and kill -9 its server after 150 of them: the texts
    the client saw, the last event id and the task id."""
    seen: list[str] = []
    last_id, task_id = "", ""
    async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
        body = _stream_body(count=2000, size=256, delay=0.01)
        async with http.stream("POST", base + "/", json=body) as response:
            async for event_id, payload in sse_frames(response):
                result = payload["result"]
                task_id = result["task"]["id"] if "task" in result else task_id
                update = result.get("artifactUpdate")
                seen += [p["text"] for p in update["artifact"]["parts"]] if update else []
                last_id = event_id or last_id
                if len(seen) >= 150:
                    proc.kill9()  # mid-stream, without any shutdown hook
                    break
    return seen, last_id, task_id


async def _resume(
    http: httpx.AsyncClient, base: str, task_id: str, last_id: str
) -> tuple[list[str], dict[str, Any] | None]:
    """Resubscribe after *last_id*: the texts of the chunks that follow, and the last status."""
    rest: list[str] = []
    final = None
    body = _rpc("SubscribeToTask", id=task_id)
    headers = {"Last-Event-ID": last_id}
    async with http.stream("POST", base + "/", json=body, headers=headers) as response:
        async for _id, payload in sse_frames(response):
            result = payload["result"]
            update = result.get("artifactUpdate")
            rest += [p["text"] for p in update["artifact"]["parts"]] if update else []
            if "statusUpdate" in result:
                final = result["statusUpdate"]["status"]
    return rest, final


@contextlib.contextmanager
def _growth_store(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.db'}"
    else:
        with pg_database_url() as url:  # its own database: its WAL records are its own
            yield url


_PG_TABLES = (
    "SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c "
    "WHERE c.relkind = 'r' AND c.relname IN ('tasks', 'task_events', 'task_versions')"
)


async def _stream_texts(http: httpx.AsyncClient, base: str, count: int, size: int) -> list[str]:
    """The text chunks of one streamed output, as the client received them."""
    texts: list[str] = []
    body = _stream_body(count=count, size=size, delay=0.0)
    async with http.stream("POST", base + "/", json=body) as response:
        async for _id, payload in sse_frames(response):
            update = payload["result"].get("artifactUpdate")
            texts += [p["text"] for p in update["artifact"]["parts"]] if update else []
    return texts


@contextlib.asynccontextmanager
async def _pg_wal_meter(url: str) -> AsyncIterator[list[int]]:
    """WAL bytes of the records touching this database's relations, written inside the
    block (``[total]``). Read every half second: a checkpoint meanwhile may recycle the
    segments of a busy shared server soon after."""
    [(available,)] = await _sql(
        url, "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_walinspect'"
    )
    if not available:
        cannot_run("the WAL is read with pg_walinspect (PostgreSQL 15 or later)")
    await _sql(url, "CREATE EXTENSION IF NOT EXISTS pg_walinspect")
    # A slot holds the server's WAL from here until it is dropped: the half-second reads
    # alone lost a segment to a checkpoint on a loaded machine (other tests' WAL).
    slot = f"apcore_a2a_wal_meter_{uuid.uuid4().hex[:12]}"
    await _sql(url, f"SELECT pg_create_physical_replication_slot('{slot}', true)")
    [(oid, start)] = await _sql(
        url,
        "SELECT oid, pg_current_wal_flush_lsn()::text FROM pg_database "
        "WHERE datname = current_database()",
    )
    total = [0]

    async def read_up_to_now() -> None:
        nonlocal start
        [(end,)] = await _sql(url, "SELECT pg_current_wal_flush_lsn()::text")
        if end != start:
            [(wal,)] = await _sql(
                url,
                "SELECT coalesce(sum(record_length), 0)::bigint FROM "
                f"pg_get_wal_records_info('{start}', '{end}') WHERE block_ref LIKE '%/{oid}/%'",
            )
            total[0] += int(wal)  # type: ignore[call-overload]
            start = end

    async def every_half_second() -> None:
        while True:
            await asyncio.sleep(0.5)
            await read_up_to_now()

    reader = asyncio.create_task(every_half_second())
    try:
        yield total
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        try:
            await read_up_to_now()
        finally:
            await _sql(url, f"SELECT pg_drop_replication_slot('{slot}')")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@pytest.mark.parametrize("cluster", [False, True], ids=["single", "cluster"])
async def test_a_long_stream_writes_a_few_times_its_size_not_once_per_chunk(
    backend: str, cluster: bool, tmp_path: Path
) -> None:
    args = ["--extensions-dir", PROBES, "--log-level", "warning"] + ["--cluster"] * cluster
    with (
        _growth_store(backend, tmp_path) as url,
        cli_server([*args, "--task-store", url], env=FAST) as (base, _proc),
    ):
        async with httpx.AsyncClient(headers=V1, timeout=600, verify=TLS) as http:
            # A first task creates the tables: the stream's rows are what it adds.
            await _stream_texts(http, base, 1, 8)
            if backend == "postgresql":
                [(tables_before,)] = await _sql(url, _PG_TABLES)
                async with _pg_wal_meter(url) as wal:
                    texts = await _stream_texts(http, base, GROWTH_CHUNKS, GROWTH_SIZE)
                [(tables_after,)] = await _sql(url, _PG_TABLES)
                grown = int(tables_after) - int(tables_before)  # type: ignore[call-overload]
                written = {"tables": grown, "WAL": wal[0]}
            else:
                with sqlite_frames_kept(url):
                    before = sqlite_bytes(url)
                    texts = await _stream_texts(http, base, GROWTH_CHUNKS, GROWTH_SIZE)
                    written = {"file and WAL": sqlite_bytes(url) - before}
            output = sum(len(t) for t in texts)
            assert output == GROWTH_CHUNKS * GROWTH_SIZE
            times = {what: round(n / output, 2) for what, n in written.items()}
            print(f"{backend} {'cluster' if cluster else 'single'}: {times} x the output")
            assert max(times.values()) <= BOUNDS[backend], times
            # Stored whole and in order, as the stream sent it.
            tasks = await http.post(base + "/", json=_rpc("ListTasks", includeArtifacts=True))
            stored = [t for t in tasks.json()["result"]["tasks"] if len(_texts(t)) > 1]
            assert [_texts(t) for t in stored] == [texts]
            assert [t[:6] for t in texts] == [f"{n:06d}" for n in range(GROWTH_CHUNKS)]


async def test_kill_9_mid_stream_loses_no_chunk_and_the_stream_goes_on_elsewhere() -> None:
    with pg_schema_url(agents=2) as url, _replica(url) as (b, _):
        with _replica(url) as (a, proc_a):
            seen, last_id, task_id = await _stream_until_killed(a, proc_a)
        async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
            # B has every chunk the client saw, in order, right away.
            assert _texts(await _get(http, b, task_id))[: len(seen)] == seen
            # The stream goes on from B after the last id: what A stored after it, then the
            # end B's recovery gives the task of a dead replica.
            rest, final = await _resume(http, b, task_id, last_id)
            # It ends (the client's read timeout is the hang guard) with B's verdict.
            assert final is not None and final["state"] == "TASK_STATE_FAILED"
            assert final["message"]["parts"][0]["text"] == INTERRUPTED_MESSAGE
            whole = seen + rest
            assert [t[:6] for t in whole] == [f"{n:06d}" for n in range(len(whole))]
            stored = await _get(http, b, task_id)
            assert stored["status"]["state"] == "TASK_STATE_FAILED"
            assert _texts(stored) == whole


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_kill_9_mid_stream_without_cluster_loses_no_chunk_after_a_restart(
    backend: str, tmp_path: Path
) -> None:
    args = ["--extensions-dir", PROBES, "--log-level", "warning"]
    with _growth_store(backend, tmp_path) as url:
        with cli_server([*args, "--task-store", url], env=FAST) as (base, proc):
            seen, last_id, task_id = await _stream_until_killed(base, proc)
        with cli_server([*args, "--task-store", url], env=FAST) as (base, _proc):
            async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
                # The restart failed the interrupted task, with every chunk it had stored.
                stored = await _get(http, base, task_id)
                assert stored["status"]["state"] == "TASK_STATE_FAILED"
                whole = _texts(stored)
                assert whole[: len(seen)] == seen
                assert [t[:6] for t in whole] == [f"{n:06d}" for n in range(len(whole))]
                assert "metadata" not in stored["artifacts"][0]
                # The event ids survive the restart: resuming after the last one seen
                # gives the chunks stored after it, then the end.
                rest, final = await _resume(http, base, task_id, last_id)
                assert seen + rest == whole
                assert final is not None and final["state"] == "TASK_STATE_FAILED"
                assert final["message"]["parts"][0]["text"] == INTERRUPTED_MESSAGE
