"""Cross-replica stream delay and idle database load of cluster mode.

``python -m benchmarks.cluster_streams [--backends postgresql,sqlite] [--modes on,off]``

For each store (a fresh PostgreSQL database on 127.0.0.1:5432, or a SQLite file) and each
wake-up mode (``A2A_CLUSTER_WAKEUPS``; ``off`` is the plain polling of a2a-sdk's
``DatabaseTaskEventStream``), two replicas A and B run with default settings
(``cluster_poll_interval`` 0.5 s). A client streams ``text.countdown`` (20 chunks, 0.1 s
apart) from A while another follows the same task with ``SubscribeToTask`` on B; the delay
of each chunk is the time B's client saw it minus the time A's client saw it.

Idle load (PostgreSQL): transactions per second of the benchmark database
(``pg_stat_database`` commits + rollbacks, the database being private to the run) with no
subscription, then with 50 ``SubscribeToTask`` streams open on B to tasks parked at
``input-required`` on A.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from benchmarks._proc import ROOT, free_port

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
EXTENSIONS = str(ROOT / "examples" / "extensions")


QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "max": 1.0}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextlib.contextmanager
def _replica(url: str, wakeups: bool) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "A2A_CLUSTER_WAKEUPS": "true" if wakeups else "false"}
    env.update({"A2A_MAX_STREAMS_PER_CALLER": "0", "A2A_MAX_UNFINISHED_TASKS_PER_CALLER": "0"})
    cmd = [sys.executable, "-m", "apcore_a2a", "serve", "--host", "127.0.0.1", "--port",
           str(port), "--extensions-dir", EXTENSIONS, "--task-store", url, "--cluster"]  # fmt: skip
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        import httpx

        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError(f"replica did not start:\n{log.read().decode()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(base + "/.well-known/agent-card.json", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


async def _pg(sql: str, database: str = "test") -> Any:
    import asyncpg

    conn = await asyncpg.connect(database=database, **PG)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


#: a backend's pending table counts reach pg_stat_user_tables when it is idle, within 10 s
_SETTLED_READS = 22


async def rows_read(database: str, tables: tuple[str, ...] = ("tasks", "task_events",
                    "task_versions")) -> int:  # fmt: skip
    """Rows of *tables* read so far (``seq_tup_read + idx_tup_fetch``), once the
    server's connections have reported them (the sum has not moved for 11 s)."""
    import asyncpg

    names = ", ".join(f"'{t}'" for t in tables)
    sql = (
        "SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0) "
        f"FROM pg_stat_user_tables WHERE relname IN ({names})"
    )
    conn = await asyncpg.connect(host="127.0.0.1", port=5432, user="postgres", database=database)
    try:
        last, same = -1, 0
        while same < _SETTLED_READS:
            await conn.execute("SELECT pg_stat_clear_snapshot()")
            now = int(await conn.fetchval(sql))
            same = same + 1 if now == last else 0
            last = now
            await asyncio.sleep(0.5)
        return last
    finally:
        await conn.close()


@contextlib.contextmanager
def _store(backend: str, folder: Path) -> Iterator[tuple[str, str | None]]:
    """``(task store URL, PostgreSQL database name or None)``."""
    if backend == "sqlite":
        yield f"sqlite:///{folder / f'{uuid.uuid4().hex}.db'}", None
        return
    name = f"apcore_bench_{uuid.uuid4().hex[:10]}"
    asyncio.run(_pg(f"CREATE DATABASE {name}"))
    try:
        yield f"postgresql://{PG['user']}@{PG['host']}:{PG['port']}/{name}", name
    finally:
        asyncio.run(_pg(f"DROP DATABASE {name} WITH (FORCE)"))


async def _client(base: str, streaming: bool) -> Any:
    import httpx
    from a2a.client import ClientConfig, ClientFactory

    http = httpx.AsyncClient(timeout=60)
    return await ClientFactory(
        ClientConfig(streaming=streaming, httpx_client=http)
    ).create_from_url(base)


def _request(skill: str, data: dict[str, Any], **config: Any) -> Any:
    from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest
    from google.protobuf.json_format import ParseDict
    from google.protobuf.struct_pb2 import Value

    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER)
    message.parts.append(Part(data=ParseDict(data, Value())))
    message.metadata.update({"skillId": skill})
    return SendMessageRequest(message=message, configuration=SendMessageConfiguration(**config))


def _remaining(response: Any) -> int | None:
    if response.WhichOneof("payload") != "artifact_update":
        return None
    for part in response.artifact_update.artifact.parts:
        value = part.data.struct_value.fields.get("remaining")
        if value is not None:
            return int(value.number_value)
    return None


async def _delays(a: str, b: str, chunks: int) -> list[float]:
    from a2a.types import SubscribeToTaskRequest

    ca, cb = await _client(a, True), await _client(b, True)
    seen_a: dict[int, float] = {}
    seen_b: dict[int, float] = {}
    started = asyncio.get_running_loop().create_future()

    async def follow_b() -> None:
        task_id = await started
        async for response in cb.subscribe(SubscribeToTaskRequest(id=task_id)):
            n = _remaining(response)
            if n is not None:
                seen_b.setdefault(n, time.perf_counter())

    follower: asyncio.Task[None] | None = None
    stream = ca.send_message(_request("text.countdown", {"start": chunks, "delay": 0.1}))
    async for response in stream:
        if not started.done():
            kind = response.WhichOneof("payload")
            task_id = response.task.id if kind == "task" else response.status_update.task_id
            started.set_result(task_id)
            follower = asyncio.create_task(follow_b())
            await asyncio.sleep(0.3)  # let B's subscription open before the first chunk
        n = _remaining(response)
        if n is not None:
            seen_a.setdefault(n, time.perf_counter())
    assert follower is not None
    await asyncio.wait_for(follower, 30)
    return [(seen_b[n] - seen_a[n]) * 1000 for n in seen_a if n in seen_b]


async def _idle_tps(database: str, seconds: float) -> float:
    sql = f"SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '{database}'"
    await asyncio.sleep(1.5)  # backends flush their counters about once a second
    before = await _pg(sql)
    await asyncio.sleep(seconds)
    after = await _pg(sql)
    return float(after - before) / seconds


@contextlib.asynccontextmanager
async def _subscriptions(a: str, b: str, count: int) -> AsyncIterator[None]:
    from a2a.types import SubscribeToTaskRequest

    ca, cb = await _client(a, False), await _client(b, True)
    parked = []
    for _ in range(count):
        async for response in ca.send_message(
            _request("bank.transfer", {"to": "acct-9", "amount": 500})
        ):
            if response.WhichOneof("payload") == "task":
                parked.append(response.task.id)
    opened = 0

    async def hold(task_id: str) -> None:
        nonlocal opened
        async for _response in cb.subscribe(SubscribeToTaskRequest(id=task_id)):
            opened += 1

    holders = [asyncio.create_task(hold(t)) for t in parked]
    while opened < count:
        failed = [h for h in holders if h.done()]
        if failed:
            raise RuntimeError(f"a subscription ended: {failed[0].exception()!r}")
        await asyncio.sleep(0.05)
    try:
        yield
    finally:
        for h in holders:
            h.cancel()
        await asyncio.gather(*holders, return_exceptions=True)


async def _idle(a: str, b: str, database: str, seconds: float) -> tuple[float, float]:
    zero = await _idle_tps(database, seconds)
    async with _subscriptions(a, b, 50):
        fifty = await _idle_tps(database, seconds)
    return zero, fifty


def run(backend: str, wakeups: bool, chunks: int, rounds: int, idle: float) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        url, database = stack.enter_context(_store(backend, Path(tmp)))
        a = stack.enter_context(_replica(url, wakeups))
        b = stack.enter_context(_replica(url, wakeups))
        delays: list[float] = []
        for _ in range(rounds):
            delays += asyncio.run(_delays(a, b, chunks))
        row: dict[str, Any] = {
            "store": backend,
            "wakeups": "on" if wakeups else "off (SDK polling)",
            "events": len(delays),
            **{k: _percentile(delays, q) for k, q in QUANTILES.items() if delays},
        }
        if database is not None and idle > 0:
            row["idle0"], row["idle50"] = asyncio.run(_idle(a, b, database, idle))
        return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| store | wake-ups | events | p50 ms | p90 ms | p99 ms | max ms "
        "| idle tx/s, 0 subs | idle tx/s, 50 subs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        idle = (f"{r['idle0']:.1f}", f"{r['idle50']:.1f}") if "idle0" in r else ("n/a", "n/a")
        quantiles = " | ".join(f"{r[k]:.1f}" if k in r else "n/a" for k in QUANTILES)
        lines.append(
            f"| {r['store']} | {r['wakeups']} | {r['events']} | {quantiles} "
            f"| {idle[0]} | {idle[1]} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.cluster_streams", description=__doc__
    )
    parser.add_argument("--backends", default="postgresql,sqlite")
    parser.add_argument("--modes", default="on,off")
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--append", metavar="FILE", help="also append the table to FILE")
    args = parser.parse_args(argv)
    rows = [
        run(backend, mode == "on", args.chunks, args.rounds, args.idle_seconds)
        for backend in args.backends.split(",")
        for mode in args.modes.split(",")
    ]
    print(table(rows))
    if args.append:
        import datetime

        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        heading = (
            f"\n## Cross-replica streams (`python -m benchmarks.cluster_streams`) — {stamp}\n\n"
        )
        with open(args.append, "a", encoding="utf-8") as sink:
            sink.write(heading + table(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
