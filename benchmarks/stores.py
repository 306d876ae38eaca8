"""The store table: blocking SendMessage at c=16 on memory, SQLite and PostgreSQL.

Systems: ours (O) on the default memory store, on a SQLite file and on a PostgreSQL schema
(also in cluster mode, as replicas and ``workers=N`` run), and the plain a2a-sdk server
(S, ``benchmarks.apps.plain_app``) with the SDK's own ``DatabaseTaskStore`` on the same two
databases. Every server start gets a fresh store (a new SQLite file, a new PostgreSQL
schema that is dropped afterwards), rounds are interleaved (all six systems, then again),
and the report gives medians with (min-max) and the ratios the durable-store targets are
judged by.

PostgreSQL is the local server the tests use (127.0.0.1:5432, user ``postgres``, trust
auth, database ``test``); when it is unreachable its systems are skipped with a note.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from benchmarks._proc import Variant, run_server
from benchmarks._wrk import run_wrk, run_wrk_count

Metrics = dict[str, float]

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "database": "test"}
CONNECTIONS = 16

# The durable-store targets of issue 20 (see docs/benchmarks.md).
TARGET_VS_MEMORY = 0.8
TARGET_VS_SDK = 1.5


@dataclass(frozen=True)
class StoreSystem:
    label: str
    kind: str  # "ours" | "plain"
    store: str  # "memory" | "sqlite" | "postgresql"
    cluster: bool = False  # ours with --cluster (versioned writes, event rows, claims)


SYSTEMS = (
    StoreSystem("O memory", "ours", "memory"),
    StoreSystem("O SQLite", "ours", "sqlite"),
    StoreSystem("O PostgreSQL", "ours", "postgresql"),
    StoreSystem("O PostgreSQL+cluster", "ours", "postgresql", cluster=True),
    StoreSystem("S SQLite", "plain", "sqlite"),
    StoreSystem("S PostgreSQL", "plain", "postgresql"),
)


def postgres_reachable() -> bool:
    try:
        with socket.create_connection((PG["host"], int(PG["port"])), timeout=1.0):
            return True
    except OSError:
        return False


def _pg_execute(sql: str) -> None:
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(**PG)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


@contextlib.contextmanager
def fresh_store(kind: str) -> Iterator[str]:
    """Yield the URL of a new, empty store of *kind*; remove it afterwards."""
    if kind == "memory":
        yield "memory://"
    elif kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="bench-store-") as folder:
            yield f"sqlite:///{folder}/tasks.db"
    elif kind == "postgresql":
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        _pg_execute(f"CREATE SCHEMA {schema}")
        try:
            yield (
                f"postgresql://{PG['user']}@{PG['host']}:{PG['port']}/{PG['database']}"
                f"?schema={schema}"
            )
        finally:
            _pg_execute(f"DROP SCHEMA {schema} CASCADE")
    else:
        raise ValueError(f"unknown store kind {kind!r}")


def measure(system: StoreSystem, duration: float, warmup: float, requests: int = 0) -> Metrics:
    """One round of *system*: fresh store, fresh server, warm-up, then wrk at c=16 for
    *duration* seconds, or until *requests* replies when that is given."""
    with (
        fresh_store(system.store) as url,
        run_server(
            Variant(system.label, system.kind), task_store=url, cluster=system.cluster
        ) as server,
    ):
        if warmup > 0:
            run_wrk(server.base_url + "/", "send", connections=4, duration=warmup)
        cpu0 = server.cpu()
        if requests:
            wrk = run_wrk_count(server.base_url + "/", total=requests, connections=CONNECTIONS)
        else:
            wrk = run_wrk(server.base_url + "/", "send", connections=CONNECTIONS, duration=duration)
        cpu = server.cpu() - cpu0
    return wrk.metrics(cpu)


def run(
    rounds: int,
    duration: float,
    warmup: float,
    *,
    systems: tuple[StoreSystem, ...] = SYSTEMS,
    log: Callable[[str], None] = print,
    notes: list[str] | None = None,
    requests: int = 0,
) -> dict[str, list[Metrics]]:
    """Interleaved rounds over *systems*; returns samples per system label."""
    if any(s.store == "postgresql" for s in systems) and not postgres_reachable():
        systems = tuple(s for s in systems if s.store != "postgresql")
        if notes is not None:
            notes.append("store table: PostgreSQL at 127.0.0.1:5432 unreachable, skipped")
    samples: dict[str, list[Metrics]] = {s.label: [] for s in systems}
    for rnd in range(1, rounds + 1):
        for system in systems:
            metrics = measure(system, duration, warmup, requests)
            samples[system.label].append(metrics)
            log(
                f"stores round {rnd} {system.label:13} {metrics['rps']:8.1f} req/s "
                f"{metrics['cpu_us']:8.0f} CPU us/req errors={metrics['errors']:.0f}"
            )
    return samples
