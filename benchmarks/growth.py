"""Growth: what a long streamed output costs the store, and what replaying it costs the server.

``python -m benchmarks.growth [--sizes 1,10] [--chunk 4096] [--modes single,cluster]
[--replay-mb 10] [--dimensions streams,turns,others] [--turns 20,200] [--pad 100]
[--others 10000,100000] [--pages 1000,10000] [--unreadable 0,1] [--append RESULTS.md]``

Streams (one process, fresh store, without and with ``--cluster`` side by side):
``bench.stream`` sends *size* MB of random text in *chunk*-character chunks (random:
PostgreSQL compresses repeated text) to one ``SendStreamingMessage`` client. Per stream:

* bytes in the store: on PostgreSQL the size of the ``tasks``, ``task_events`` and
  ``task_versions`` tables (with indexes and TOAST, dead rows included: no vacuum runs in
  between) and the WAL written for the benchmark's database (``pg_walinspect``, records
  that touch its relations); on SQLite the database file once the server closed it
  (its WAL checkpointed), and as "WAL" what the stream wrote to the file and its WAL (a
  read transaction held meanwhile keeps every WAL frame). Each also as a multiple of the
  output;
* time per chunk (arrival at the client), mean of the first 100 and of the last 100
  chunks, and their ratio (1.0 = flat).

Replay (cluster mode): a fresh server process on a store holding a finished *replay-mb* MB task;
10 clients subscribe to it at once with ``Last-Event-ID: 0`` (every event from the
start) and read to the end. The row is the server's RSS growth (peak sampled every
20 ms, minus the RSS before the clients came).

Other dimensions (``--dimensions turns,others``; ``streams`` is the above), each at two
sizes so the growth ratio shows, in costs that do not depend on the clock:

* ``turns``: one task continued *n* times (``bench.turns`` asks a question of ``--pad``
  characters at every follow-up; ``--turns 20,200``), and the rows and bytes of its
  ``task_events`` (its replay log) at the end: bytes the tables and WAL grew by (SQLite:
  file and WAL, every frame kept) and rows of the store's tables read (PostgreSQL
  ``pg_stat_user_tables``: ``seq_tup_read + idx_tup_fetch``), per turn; a conversation
  the history bound (``max_task_history_*``) refuses first is measured up to its refusal;
* ``pages``: one caller paging through *n* tasks of its own with ``ListTasks``
  (``--pages 1000,10000``, ``--page-size 50``, ``--unreadable 0,1``: that percent of
  its rows unreadable; ``benchmarks/pages.py``);
* ``others``: one caller's ``GetTask``, ``ListTasks`` and new ``SendMessage`` while the
  store holds *n* tasks of other callers (``--others 10000,100000``, inserted by SQL),
  and an agent's start and stop alone on that store, rows of ``tasks`` each read
  (PostgreSQL).

Idle subscribers (transactions/s with 0, 50, 500 open subscriptions on two PostgreSQL
replicas) are measured by ``benchmarks.idle`` and join the table (``--idle ""``: not).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks._proc import ROOT, free_port, rss_bytes
from benchmarks.cluster_streams import _pg, _store, rows_read
from benchmarks.idle import idle_rates, table
from benchmarks.pages import PagesRow, measure_pages, render_pages

EXTENSIONS = str(Path(__file__).resolve().parent / "extensions")
CHUNK = 4096
MB = 1_000_000
REPLAY_CLIENTS = 10


@dataclass
class StreamRow:
    backend: str
    mode: str
    mb: float
    chunks: int
    output: int = 0
    tables: int = 0
    wal: int | None = None
    first: float = 0.0
    last: float = 0.0
    seconds: float = 0.0


@dataclass
class ReplayRow:
    backend: str
    mb: float
    clients: int
    rss_before: int = 0
    rss_peak: int = 0
    seconds: float = 0.0
    received: list[int] = field(default_factory=list)


@contextlib.contextmanager
def _server(url: str, cluster: bool = True) -> Iterator[tuple[str, int]]:
    """One server process on *url* (a cluster replica, or alone): (base URL, pid)."""
    import httpx

    port = free_port()
    env = {**os.environ, "A2A_MAX_STREAMS_PER_CALLER": "0"}
    cmd = [sys.executable, "-m", "apcore_a2a", "serve", "--host", "127.0.0.1", "--port",
           str(port), "--extensions-dir", EXTENSIONS, "--task-store", url]  # fmt: skip
    cmd += ["--cluster"] * cluster
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # a busy machine starts slowly
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError(f"server did not start:\n{log.read().decode()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(base + "/.well-known/agent-card.json", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        try:
            yield base, proc.pid
        except Exception as exc:
            log.seek(0)
            tail = log.read().decode(errors="replace")[-3000:]
            raise RuntimeError(f"{exc}\nserver output:\n{tail}") from exc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _send_body(chunks: int, size: int = CHUNK) -> dict[str, Any]:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"chunks": chunks, "size": size}}],
        "metadata": {"skillId": "bench.stream"},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": message}}  # fmt: skip


async def _stream(base: str, chunks: int, size: int = CHUNK) -> tuple[str, list[float], int]:
    """Stream one output: (task id, arrival time of each chunk, output characters)."""
    import httpx

    arrivals: list[float] = []
    output, task_id, state = 0, "", ""
    async with (
        httpx.AsyncClient(timeout=600) as http,
        http.stream(
            "POST", base + "/", json=_send_body(chunks, size), headers={"A2A-Version": "1.0"}
        ) as response,
    ):
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            result = json.loads(line[5:])["result"]
            if "task" in result:
                task_id = result["task"]["id"]
            elif "artifactUpdate" in result:
                arrivals.append(time.perf_counter())
                output += sum(
                    len(p.get("text", "")) for p in result["artifactUpdate"]["artifact"]["parts"]
                )
            elif "statusUpdate" in result:
                state = result["statusUpdate"]["status"]["state"]
    if state != "TASK_STATE_COMPLETED" or len(arrivals) != chunks:
        raise RuntimeError(f"stream ended {state} after {len(arrivals)} of {chunks} chunks")
    return task_id, arrivals, output


def _per_chunk(arrivals: list[float], start: float) -> list[float]:
    return [b - a for a, b in zip([start, *arrivals], arrivals, strict=False)]


async def _pg_bytes(database: str) -> int:
    return int(
        await _pg(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' "
            "AND c.relname IN ('tasks', 'task_events', 'task_versions') "
            "AND n.nspname = 'public'",
            database,
        )
    )


async def _wal_lsn() -> str:
    return str(await _pg("SELECT pg_current_wal_flush_lsn()::text"))


class WalMeter:
    """WAL bytes of the records that touch *database*'s relations, read as they come.

    Read every half second: a busy shared server recycles WAL segments soon after a
    checkpoint, so reading them all at the end may find them gone.
    """

    def __init__(self, database: str) -> None:
        self.database = database
        self.total = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        database = self.database
        oid = await _pg(f"SELECT oid FROM pg_database WHERE datname = '{database}'")
        await _pg("CREATE EXTENSION IF NOT EXISTS pg_walinspect", database)
        start = await _wal_lsn()
        while True:
            stopping = self._stop.is_set()
            end = await _wal_lsn()
            self.total += (
                0
                if end == start
                else int(
                    await _pg(
                        "SELECT coalesce(sum(record_length), 0) FROM pg_get_wal_records_info("
                        f"'{start}', '{end}') WHERE block_ref LIKE '%/{oid}/%'",
                        database,
                    )
                )
            )
            start = end
            if stopping:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), 0.5)

    def stop(self) -> None:
        self._stop.set()


async def _metered_stream(
    base: str, chunks: int, size: int, meter: WalMeter | None
) -> tuple[str, list[float], int]:
    if meter is None:
        return await _stream(base, chunks, size)
    running = asyncio.create_task(meter.run())
    await asyncio.sleep(0.5)  # the meter has its starting point
    try:
        return await _stream(base, chunks, size)
    finally:
        meter.stop()
        await running


def sqlite_bytes(url: str) -> int:
    """Bytes of the SQLite store at *url* on disk: its file and its WAL."""
    path = Path(url.removeprefix("sqlite:///"))
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


@contextlib.contextmanager
def sqlite_frames_kept(url: str) -> Iterator[None]:
    """A read transaction held on the SQLite store at *url*, so no checkpoint reuses the
    WAL and it keeps every frame written meanwhile (its growth is what was written)."""
    reader = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM tasks").fetchall()
        yield
    finally:
        reader.execute("COMMIT")
        reader.close()


def measure_stream(
    backend: str, mb: float, folder: Path, *, cluster: bool = True, chunk: int = CHUNK
) -> StreamRow:
    chunks = max(1, round(mb * MB / chunk))
    row = StreamRow(backend, "cluster" if cluster else "single", mb, chunks)
    with _store(backend, folder) as (url, database):
        with _server(url, cluster) as (base, _pid):
            asyncio.run(_stream(base, 1, 8))  # the tables exist: the stream adds rows only
            before = sqlite_bytes(url) if database is None else asyncio.run(_pg_bytes(database))
            meter = WalMeter(database) if database is not None else None
            start = time.perf_counter()
            with sqlite_frames_kept(url) if database is None else contextlib.nullcontext():
                streamed = asyncio.run(_metered_stream(base, chunks, chunk, meter))
                if database is None:
                    row.wal = sqlite_bytes(url) - before
            _task, arrivals, row.output = streamed
            row.seconds = time.perf_counter() - start
            if database is not None and meter is not None:
                row.tables = asyncio.run(_pg_bytes(database)) - before
                row.wal = meter.total
        if database is None:  # after the server closed it: its WAL is checkpointed then
            row.tables = sqlite_bytes(url) - before
    times = _per_chunk(arrivals, start)[1:]  # the first one also waited for the task
    window = min(100, max(1, len(times) // 4))
    row.first = sum(times[:window]) / window
    row.last = sum(times[-window:]) / window
    return row


async def _replay_clients(base: str, task_id: str, pid: int, row: ReplayRow) -> None:
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
    headers = {"A2A-Version": "1.0", "Last-Event-ID": "0"}

    async def one(http: httpx.AsyncClient) -> int:
        received = 0
        async with http.stream("POST", base + "/", json=body, headers=headers) as response:
            async for data in response.aiter_bytes():
                received += len(data)
        return received

    done = False

    async def sample() -> None:
        while not done:
            row.rss_peak = max(row.rss_peak, rss_bytes(pid))
            await asyncio.sleep(0.02)

    sampler = asyncio.create_task(sample())
    start = time.perf_counter()
    async with httpx.AsyncClient(timeout=600) as http:
        row.received = await asyncio.gather(*(one(http) for _ in range(row.clients)))
    row.seconds = time.perf_counter() - start
    done = True
    await sampler


def measure_replay(backend: str, mb: float, folder: Path) -> ReplayRow:
    row = ReplayRow(backend, mb, REPLAY_CLIENTS)
    with _store(backend, folder) as (url, _database):
        with _server(url) as (base, _pid):
            task_id, _arrivals, _output = asyncio.run(_stream(base, round(mb * MB / CHUNK)))
        with _server(url) as (base, pid):
            time.sleep(1.0)  # let start-up settle
            row.rss_before = row.rss_peak = rss_bytes(pid)
            asyncio.run(_replay_clients(base, task_id, pid, row))
    if min(row.received) < mb * MB:
        raise RuntimeError(f"a replay client got only {min(row.received)} bytes")
    return row


# -- other dimensions: turns of one task, other callers' tasks ---------------------------


@dataclass
class TurnsRow:
    backend: str
    mode: str
    turns: int
    #: follow-ups the agent took (fewer: the rest refused by ``max_task_history_*``)
    taken: int = 0
    task_bytes: int = 0
    tables: int = 0
    wal: int | None = None
    rows_read: int | None = None
    #: rows and bytes of the task's ``task_events`` at the end (its replay log)
    events: int = 0
    event_bytes: int = 0


@dataclass
class OthersRow:
    backend: str
    mode: str
    others: int
    #: request -> rows of ``tasks`` it read
    reads: dict[str, int] = field(default_factory=dict)


async def _rpc(http: Any, base: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply = (await http.post(base + "/", json=body, headers={"A2A-Version": "1.0"})).json()
    if "result" not in reply:
        raise RuntimeError(f"{method}: {reply}")
    return dict(reply["result"])


def _turn(data: dict[str, Any], task_id: str = "", context_id: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                               "parts": [{"data": data}]}  # fmt: skip
    if task_id:
        message["taskId"] = task_id
    else:
        message["metadata"] = {"skillId": "bench.turns"}
    if context_id:
        message["contextId"] = context_id
    return {"message": message}


async def _converse(base: str, turns: int, pad: int = 100) -> tuple[str, str, int]:
    """Start a ``bench.turns`` task and continue it *turns* times (questions of *pad*
    characters), or until a follow-up is refused by the history bound: (task id, state,
    follow-ups taken)."""
    import httpx

    async with httpx.AsyncClient(timeout=60) as http:
        first = _turn({"turns": turns, "pad": pad})
        task = (await _rpc(http, base, "SendMessage", first))["task"]
        for turn in range(1, turns + 1):
            follow_up = _turn({"turn": turn, "pad": pad}, task["id"])
            try:
                reply = await _rpc(http, base, "SendMessage", follow_up)
            except RuntimeError as refused:
                if "-32091" not in str(refused):
                    raise
                return task["id"], "refused", turn - 1
            task = reply["task"]
        return task["id"], task["status"]["state"], turns


def measure_turns(
    backend: str, turns: int, folder: Path, *, cluster: bool, pad: int = 100
) -> TurnsRow:
    import httpx

    row = TurnsRow(backend, "cluster" if cluster else "single", turns)
    with _store(backend, folder) as (url, database), _server(url, cluster) as (base, _):
        asyncio.run(_converse(base, 0))  # the tables exist: the turns add rows only
        if database is None:
            before = sqlite_bytes(url)
            with sqlite_frames_kept(url):
                task_id, state, row.taken = asyncio.run(_converse(base, turns, pad))
                row.wal = sqlite_bytes(url) - before
        else:
            before = asyncio.run(_pg_bytes(database))
            read = asyncio.run(rows_read(database))
            meter = WalMeter(database)

            async def metered() -> tuple[str, str, int]:
                running = asyncio.create_task(meter.run())
                await asyncio.sleep(0.5)
                try:
                    return await _converse(base, turns, pad)
                finally:
                    meter.stop()
                    await running

            task_id, state, row.taken = asyncio.run(metered())
            row.tables = asyncio.run(_pg_bytes(database)) - before
            row.wal = meter.total
            row.rows_read = asyncio.run(rows_read(database)) - read
        if state not in ("TASK_STATE_COMPLETED", "refused"):
            raise RuntimeError(f"conversation ended {state}")
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
        reply = httpx.post(base + "/", json=body, headers={"A2A-Version": "1.0"}, timeout=60)
        row.task_bytes = len(json.dumps(reply.json()["result"]))
        where = f"FROM task_events WHERE task_id = '{task_id}'"
        counts = f"SELECT count(*) || ' ' || coalesce(sum(length(event_data)), 0) {where}"
        if database is None:
            with contextlib.closing(sqlite3.connect(url.split("///", 1)[1])) as db:
                counted = str(db.execute(counts).fetchone()[0])
        else:
            counted = str(asyncio.run(_pg(counts, database)))
        row.events, row.event_bytes = (int(n) for n in counted.split())
    if database is None:
        row.tables = sqlite_bytes(url) - before
    return row


_OTHER_TASKS = (
    "INSERT INTO tasks (id, context_id, kind, owner, last_updated, status, history, "
    "protocol_version) SELECT 'other-' || g, 'ctx-' || g, 'task', 'caller-' || (g % 1000), "
    "now() - g * interval '1 second', '{{\"state\": \"TASK_STATE_COMPLETED\"}}', "
    "'[]', '1.0' FROM generate_series(1, {n}) g"
)


def measure_others(backend: str, others: int, folder: Path, *, cluster: bool) -> OthersRow:
    """Rows of ``tasks`` one caller's requests read with *others* tasks of 1,000 other
    callers in the store (PostgreSQL), and an agent's start and stop alone."""
    import httpx

    row = OthersRow(backend, "cluster" if cluster else "single", others)
    with _store(backend, folder) as (url, database):
        assert database is not None, "rows read are PostgreSQL's counts"
        with _server(url, cluster) as (base, _):
            asyncio.run(_converse(base, 0))
            asyncio.run(_pg(_OTHER_TASKS.format(n=others), database))
            asyncio.run(_pg("ANALYZE tasks", database))

            async def requests() -> None:
                async with httpx.AsyncClient(timeout=60) as http:
                    task = (await _rpc(http, base, "SendMessage", _turn({"turns": 0})))["task"]
                    calls = {
                        "GetTask": ("GetTask", {"id": task["id"]}),
                        "ListTasks": ("ListTasks", {}),
                        "SendMessage (new task)": ("SendMessage", _turn({"turns": 0})),
                        "SendMessage (its context)": (
                            "SendMessage", _turn({"turns": 0}, context_id=task["contextId"])),
                    }  # fmt: skip
                    for name, (method, params) in calls.items():
                        before = await rows_read(database, ("tasks",))
                        await _rpc(http, base, method, params)
                        row.reads[name] = await rows_read(database, ("tasks",)) - before

            asyncio.run(requests())
        # A start and a stop alone, once that server has stopped: restart recovery looks
        # for the tasks left running (here none: the other callers' tasks are finished).
        before = asyncio.run(rows_read(database, ("tasks",)))
        with _server(url, cluster):
            pass
        row.reads["agent start and stop"] = asyncio.run(rows_read(database, ("tasks",))) - before
    return row


def render_dimensions(turns: list[TurnsRow], others: list[OthersRow]) -> str:
    """Tables of the other dimensions, each size beside the smallest (the growth ratio)."""
    lines: list[str] = []
    if turns:
        lines += [
            "One task continued *n* times (`bench.turns`, a question of `--pad` characters, "
            "100 by default, per turn):"
            " bytes the store grew by and WAL written (PostgreSQL: records of its database; "
            "SQLite: file and WAL, every frame kept), rows of `tasks`, `task_events`, "
            "`task_versions` read; per turn, and the task as `GetTask` returns it.",
            "",
            "| store | mode | turns | task (JSON) | store bytes / turn | WAL / turn | "
            "rows read / turn | task_events rows | task_events bytes |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for t in turns:
            wal = "—" if t.wal is None else f"{t.wal / t.taken:,.0f}"
            read = "—" if t.rows_read is None else f"{t.rows_read / t.taken:,.1f}"
            n = str(t.turns) if t.taken == t.turns else f"{t.taken} (then refused)"
            lines.append(
                f"| {t.backend} | {t.mode} | {n} | {t.task_bytes:,} | "
                f"{t.tables / t.taken:,.0f} | {wal} | {read} | {t.events:,} | "
                f"{t.event_bytes:,} |"
            )
        lines.append("")
    if others:
        names = list(others[0].reads)
        lines += [
            "Rows of `tasks` one caller's request read while the store holds *n* tasks of "
            "1,000 other callers (PostgreSQL `pg_stat_user_tables`):",
            "",
            "| store | mode | other tasks | " + " | ".join(names) + " |",
            "|---|---|---|" + "---|" * len(names),
        ]
        for o in others:
            cells = " | ".join(str(o.reads[n]) for n in names)
            lines.append(f"| {o.backend} | {o.mode} | {o.others:,} | {cells} |")
        lines.append("")
    return "\n".join(lines)


def _mb(n: float) -> str:
    return f"{n / MB:.1f} MB"


def _targets(streams: list[StreamRow], replays: list[ReplayRow]) -> list[str]:
    """Issue 33's and 43's targets, judged on this run's own rows."""
    out = []
    for s in (s for s in streams if s.mb >= 10):
        x = max(s.tables, s.wal or 0) / s.output
        bound = 3 if s.backend == "postgresql" else 5  # issue 43: SQLite frames are pages
        ratio = s.last / s.first
        out.append(
            f"- {s.backend} {s.mode} {s.mb:g} MB: stored ≤ {bound:g}x the output: "
            f"**{_met(x <= bound)}** ({x:.2f}x); "
            f"last 100 chunks ≤ 1.5x the first 100: **{_met(ratio <= 1.5)}** ({ratio:.2f})"
        )
    for r in replays:
        grown = r.rss_peak - r.rss_before
        out.append(
            f"- {r.backend} replay of {r.mb:g} MB by {r.clients} clients: RSS + ≤ 50 MB: "
            f"**{_met(grown <= 50 * MB)}** ({_mb(grown)})"
        )
    return out


def _met(ok: bool) -> str:
    return "met" if ok else "not met"


def render(
    streams: list[StreamRow], replays: list[ReplayRow], title: str | None, idle: str = ""
) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"## {title or 'Growth'} (`python -m benchmarks.growth`) — {stamp}",
        "",
        "Streams of random-text chunks, one process without and with `--cluster`; bytes are "
        "what the store grew by (tables with indexes and TOAST, no vacuum; SQLite: the file "
        "once checkpointed), WAL what was written (PostgreSQL: records of the benchmark's "
        "database; SQLite: file and WAL, every frame kept), x = multiple of the output. "
        "Time per chunk at the client.",
        "",
        "| store | mode | output | chunks | store bytes | x | WAL | x | first 100 | last 100 | "
        "last/first | total |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in streams:
        wal = "—" if s.wal is None else _mb(s.wal)
        wal_x = "—" if s.wal is None else f"{s.wal / s.output:.2f}"
        lines.append(
            f"| {s.backend} | {s.mode} | {_mb(s.output)} | {s.chunks} | {_mb(s.tables)} | "
            f"{s.tables / s.output:.2f} | {wal} | {wal_x} | {s.first * 1000:.2f} ms | "
            f"{s.last * 1000:.2f} ms | {s.last / s.first:.2f} | {s.seconds:.1f} s |"
        )
    lines += [
        "",
        f"Replay: {REPLAY_CLIENTS} clients at once, `SubscribeToTask` with `Last-Event-ID: 0` "
        "on a fresh server process, each reading the whole finished task.",
        "",
        "| store | task | clients | RSS before | RSS growth (peak) | time |",
        "|---|---|---|---|---|---|",
    ]
    for r in replays:
        lines.append(
            f"| {r.backend} | {r.mb:g} MB | {r.clients} | {_mb(r.rss_before)} | "
            f"{_mb(r.rss_peak - r.rss_before)} | {r.seconds:.1f} s |"
        )
    lines += ["", *_targets(streams, replays)]
    if idle:
        lines += ["", idle]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.growth", description=__doc__)
    parser.add_argument("--sizes", default="1,10", help="stream sizes in MB (comma-separated)")
    parser.add_argument("--backends", default="postgresql,sqlite")
    parser.add_argument("--modes", default="single,cluster", help="single,cluster (pages: app too)")
    parser.add_argument("--chunk", type=int, default=CHUNK, help="characters per chunk")
    parser.add_argument("--replay-mb", type=float, default=10.0, help="0: no replay row")
    parser.add_argument("--idle", default="0,50,500", help='subscriber counts ("": none)')
    parser.add_argument("--dimensions", default="streams", help="streams,turns,others,pages")
    parser.add_argument("--turns", default="20,200", help="follow-ups of one task")
    parser.add_argument("--pad", type=int, default=100, help="characters of each question")
    parser.add_argument("--others", default="10000,100000", help="other callers' tasks")
    parser.add_argument("--pages", default="1000,10000", help="the caller's own tasks")
    parser.add_argument("--page-size", type=int, default=50, help="ListTasks pageSize")
    parser.add_argument(
        "--unreadable", default="0", help="percents of the caller's rows unreadable (pages)"
    )
    parser.add_argument("--title")
    parser.add_argument("--append", type=Path, help="Markdown file to append the table to")
    args = parser.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    streams: list[StreamRow] = []
    replays: list[ReplayRow] = []
    dimensions = [d for d in args.dimensions.split(",") if d]
    modes = [m for m in args.modes.split(",") if m]
    turns: list[TurnsRow] = []
    others: list[OthersRow] = []
    pages: list[PagesRow] = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            for mode, n in ((m, int(n)) for n in args.turns.split(",") for m in modes):
                if "turns" in dimensions:
                    cluster = mode == "cluster"
                    measured = measure_turns(backend, n, Path(tmp), cluster=cluster, pad=args.pad)
                    turns.append(measured)
                    print(turns[-1], file=sys.stderr, flush=True)
            for mode, n in ((m, int(n)) for n in args.others.split(",") for m in modes):
                if "others" in dimensions and backend == "postgresql":
                    others.append(measure_others(backend, n, Path(tmp), cluster=mode == "cluster"))
                    print(others[-1], file=sys.stderr, flush=True)
            damaged = [int(p) for p in args.unreadable.split(",") if p]
            for mode, n in ((m, int(n)) for n in args.pages.split(",") for m in modes):
                if "pages" not in dimensions or (backend == "memory" and mode != "single"):
                    continue
                for percent in damaged if backend != "memory" else [0]:
                    measured = measure_pages(
                        backend,
                        n,
                        Path(tmp),
                        mode=mode,
                        page_size=args.page_size,
                        unreadable=percent,
                    )
                    pages.append(measured)
                    print(measured, file=sys.stderr, flush=True)
            if "streams" not in dimensions:
                continue
            for size in (float(s) for s in args.sizes.split(",") if s):
                for mode in (m for m in args.modes.split(",") if m):
                    row = measure_stream(
                        backend, size, Path(tmp), cluster=mode == "cluster", chunk=args.chunk
                    )
                    streams.append(row)
                    print(row, file=sys.stderr, flush=True)
            if args.replay_mb:
                replays.append(measure_replay(backend, args.replay_mb, Path(tmp)))
                print(replays[-1].rss_peak - replays[-1].rss_before, file=sys.stderr, flush=True)
    counts = [int(n) for n in args.idle.split(",") if n] if "streams" in dimensions else []
    idle_table = table(idle_rates(counts)) if counts and "postgresql" in backends else ""
    text = render(streams, replays, args.title, idle_table) if "streams" in dimensions else ""
    if not text:
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        text = f"## {args.title or 'Growth'} (`python -m benchmarks.growth`) — {stamp}\n\n"
    text += render_dimensions(turns, others) + render_pages(pages)
    print(text)
    if args.append:
        with args.append.open("a") as out:
            out.write("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
