"""Growth of retention's cost with the finished tasks kept (PostgreSQL).

``python -m benchmarks.retention_growth [--kept 10000,100000] [--due 100] [--append RESULTS.md]``

A fresh database per size holds *kept* finished tasks noted now (none due) and *due*
noted long ago (inserted by SQL, then analysed as autovacuum would). The rows of
``tasks`` and ``apcore_a2a_finished_tasks`` read (``pg_stat_user_tables``:
``seq_tup_read + idx_tup_fetch``) by one retention pass (``storage/retention.py``
``purge``: deletes the due), and by one sweep (``note`` of every task: once per
retention; until 2026-12-06 every pass made it, every 5 minutes at most).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import text

from apcore_a2a.settings import Settings
from apcore_a2a.storage import open_stores
from apcore_a2a.storage.retention import note, purge

from .cluster_streams import _store, rows_read

_TABLES = ("tasks", "apcore_a2a_finished_tasks")
_TASKS = (
    "INSERT INTO tasks (id, context_id, kind, status, protocol_version) SELECT "
    "'{p}-' || g, 'c', 'task', '{{\"state\": \"TASK_STATE_COMPLETED\"}}', '1.0' "
    "FROM generate_series(1, {n}) g"
)
_NOTES = (
    "INSERT INTO apcore_a2a_finished_tasks SELECT '{p}-' || g, {at} FROM generate_series(1, {n}) g"
)


async def measure(url: str, database: str, kept: int, due: int) -> tuple[int, int, int]:
    """``(deleted, rows a pass read, rows a sweep read)``."""
    stores = open_stores(url, Settings.defaults())
    await stores.start()
    try:
        assert stores.engine is not None
        async with stores.engine.begin() as conn:
            for p, n, at in (("kept", kept, "extract(epoch from now())"), ("due", due, "0")):
                await conn.execute(text(_TASKS.format(p=p, n=n)))
                await conn.execute(text(_NOTES.format(p=p, n=n, at=at)))
            await conn.execute(text("ANALYZE tasks, apcore_a2a_finished_tasks"))
        before = await rows_read(database, _TABLES)
        deleted = await purge(stores.engine, 3600, [])
        passed = await rows_read(database, _TABLES)
        await note(stores.engine)
        swept = await rows_read(database, _TABLES)
        return deleted, passed - before, swept - passed
    finally:
        await stores.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.retention_growth")
    parser.add_argument("--kept", default="10000,100000", help="finished tasks kept")
    parser.add_argument("--due", type=int, default=100, help="tasks due at the pass")
    parser.add_argument("--append", type=Path, help="Markdown file to append the table to")
    args = parser.parse_args(argv)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"## Retention growth (`python -m benchmarks.retention_growth`) — {stamp}",
        "",
        "Rows of `tasks` and `apcore_a2a_finished_tasks` read (PostgreSQL "
        "`pg_stat_user_tables`) by one retention pass with *due* tasks due, and by one "
        "sweep (once per retention; every pass made it before).",
        "",
        "| finished tasks kept | due | deleted | rows read by a pass | rows read by a sweep |",
        "|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for kept in (int(n) for n in args.kept.split(",") if n):
            with _store("postgresql", Path(tmp)) as (url, database):
                assert database is not None
                deleted, passed, swept = asyncio.run(measure(url, database, kept, args.due))
            lines.append(f"| {kept:,} | {args.due} | {deleted} | {passed:,} | {swept:,} |")
            print(lines[-1], file=sys.stderr, flush=True)
    out = "\n".join(lines) + "\n"
    print(out)
    if args.append:
        with args.append.open("a") as file:
            file.write("\n" + out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
