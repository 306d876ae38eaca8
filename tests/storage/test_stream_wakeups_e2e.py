"""Cluster streams are woken by new events (PostgreSQL LISTEN/NOTIFY, SQLite file watch).

The replicas here poll the event table only once a minute, so an event reaches replica
B within the test's timeout only through a wake-up. The oracle is what B's client
receives: every chunk after its snapshot, once each, in order, then ``completed``.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from a2a.server.cluster import DatabaseTaskEventStream
from a2a.types import SubscribeToTaskRequest, TaskState

from tests._sdk import request

from .._postgres import pg_schema_url
from .._support import cli_server
from ._a2a import EXTENSIONS, client, send

#: far longer than any test here: only a wake-up delivers in time
SLOW_POLL = "60"
DEADLINE = 30.0


@contextlib.contextmanager
def _pair(backend: str, folder: Path) -> Iterator[tuple[str, str, str]]:
    """Replicas A and B on one fresh store: (URL A, URL B, store URL)."""
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            url = f"sqlite:///{folder / 'tasks.db'}"
        else:
            url = stack.enter_context(pg_schema_url(agents=2))
        args = ["--extensions-dir", EXTENSIONS, "--task-store", url, "--cluster"]
        env = {"A2A_CLUSTER_POLL_INTERVAL": SLOW_POLL}
        a, _pa = stack.enter_context(cli_server(args, env=env))
        b, _pb = stack.enter_context(cli_server(args, env=env))
        yield a, b, url


class _Pairs:
    """Replica pairs started on first use and kept for the module (one per backend)."""

    def __init__(self, stack: contextlib.ExitStack, folder: Path) -> None:
        self.stack, self.folder, self.started = stack, folder, {}

    def __call__(self, backend: str) -> tuple[str, str, str]:
        if backend not in self.started:
            self.started[backend] = self.stack.enter_context(_pair(backend, self.folder))
        return self.started[backend]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Pairs]:
    with contextlib.ExitStack() as stack:
        yield _Pairs(stack, tmp_path_factory.mktemp("wakeups"))


async def _follow_on_b(
    a: str, b: str, chunks: int, on_chunk: Callable[[int], Awaitable[None]] | None = None
) -> tuple[list[int], int | None]:
    """Run ``text.countdown`` on A, follow it on B: (live chunks B got, B's final state)."""
    ca, sb = await client(a), await client(b, streaming=True)
    started = await send(
        ca, request("text.countdown", {"start": chunks, "delay": 0.05}, return_immediately=True)
    )
    live: list[int] = []
    final = None
    deadline = time.monotonic() + DEADLINE
    async for response in sb.subscribe(SubscribeToTaskRequest(id=started.id)):
        assert time.monotonic() < deadline, f"B stalled after {live}"
        kind = response.WhichOneof("payload")
        if kind == "artifact_update":
            for part in response.artifact_update.artifact.parts:
                value = part.data.struct_value.fields.get("remaining")
                if value is not None:
                    live.append(int(value.number_value))
                    if on_chunk is not None:
                        await on_chunk(len(live))
        elif kind == "status_update":
            final = response.status_update.status.state
    return live, final


def _assert_rest_exactly_once(live: list[int]) -> None:
    # Counting down to 0 one by one: a gap or a duplicate breaks the run.
    assert live, "B relayed no chunk"
    assert live == list(range(live[0], -1, -1)), live


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_b_relays_a_stream_by_wakeups_alone(backend: str, pairs: _Pairs) -> None:
    a, b, _url = pairs(backend)
    live, final = await _follow_on_b(a, b, chunks=30)
    _assert_rest_exactly_once(live)
    assert len(live) >= 10  # most of the countdown was live, not in B's snapshot
    assert final == TaskState.TASK_STATE_COMPLETED


def _listen_sessions(schema: str, terminate: bool) -> int:
    """How many LISTEN sessions of *schema* exist (or were terminated)."""
    import asyncio
    import concurrent.futures

    import asyncpg

    from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER

    sql = (
        f"SELECT {'pg_terminate_backend(pid)' if terminate else 'pid'} FROM pg_stat_activity "
        "WHERE application_name = $1"
    )

    async def run() -> int:
        conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
        try:
            return len(await conn.fetch(sql, f"apcore-a2a listen {schema}"))
        finally:
            await conn.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


async def test_a_killed_listen_connection_loses_no_event_and_comes_back(pairs: _Pairs) -> None:
    import asyncio

    a, b, url = pairs("postgresql")
    schema = parse_qs(urlsplit(url).query)["schema"][0]
    assert _listen_sessions(schema, terminate=False) == 2  # one per replica
    killed: list[int] = []

    async def kill_at_fifth(seen: int) -> None:
        if seen == 5:
            killed.append(await asyncio.to_thread(_listen_sessions, schema, True))

    live, final = await _follow_on_b(a, b, chunks=40, on_chunk=kill_at_fifth)
    assert killed == [2]
    _assert_rest_exactly_once(live)
    assert final == TaskState.TASK_STATE_COMPLETED
    # Both replicas listen again (the rest of the stream already needed B's).
    deadline = time.monotonic() + DEADLINE
    while _listen_sessions(schema, terminate=False) < 2:
        assert time.monotonic() < deadline, "the LISTEN connections did not come back"
        await asyncio.sleep(0.05)
    again, final = await _follow_on_b(a, b, chunks=10)
    _assert_rest_exactly_once(again)
    assert final == TaskState.TASK_STATE_COMPLETED


def test_sdk_event_stream_still_has_no_wakeup_hook() -> None:
    """``WakingTaskEventStream`` replaces the SDK's sleep; notice when the SDK grows a hook.

    If this fails, the SDK's ``DatabaseTaskEventStream`` changed: see whether it now wakes
    subscribers itself (then use that).
    """
    public = {n for n, _ in inspect.getmembers(DatabaseTaskEventStream) if not n.startswith("_")}
    assert public == {"destroy", "initialize", "publish", "subscribe"}
    params = list(inspect.signature(DatabaseTaskEventStream.__init__).parameters)
    assert params == ["self", "engine", "create_table", "table_name", "poll_interval_s"]
    assert "asyncio.sleep(self._poll_interval_s)" in inspect.getsource(
        DatabaseTaskEventStream.subscribe
    )
