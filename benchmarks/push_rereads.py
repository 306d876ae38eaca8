"""What the push sender reads from its store per event and per delivery attempt.

``python -m benchmarks.push_rereads [--rounds 2000]``

The sender (``push/sender.py``) reads, for each event (``send_notification``) and for each
attempt once it holds a delivery slot, the task's configs with their records (failures and
protocol versions) in one read, ``PushConfigStore.now`` (on SQL one statement, the records
joined to the configs): a config deleted, replaced or given up on by another replica, or
gone with its task, ends its deliveries at the next attempt. Nothing else is read before a
POST.

For each store (memory, a SQLite file, a PostgreSQL schema in cluster mode) a task with
one config, then, in this process: *rounds* reads of its configs alone, *rounds* reads of
the configs with their records (``now``), and *rounds* whole deliveries
(``send_notification`` then ``idle``: serialize, queue, the reads, a signed POST to a
receiver on 127.0.0.1 that answers 204: one attempt each). The figures are the mean
microseconds of each, an attempt's read (``now``) as a share of a delivery, and, counted
(independent of the machine's load), per event (in ``send_notification``) and per attempt
(in ``idle``): the store reads made (calls of ``now`` and of ``get_info_for_dispatch``;
SQL and memory stores alike) and the SQL statements on the push tables executed
(SQLAlchemy ``before_cursor_execute``; not the cluster's heartbeats, nor the ``BEGIN``
SQLite sends before each read).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.types import TaskPushNotificationConfig, TaskState, TaskStatus, TaskStatusUpdateEvent
from sqlalchemy.event import listen

from apcore_a2a.push import build_push
from apcore_a2a.settings import Settings
from apcore_a2a.storage import open_stores
from benchmarks.stores import fresh_store, postgres_reachable


async def _answer_204(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(v)
            for n, _, v in (h.partition(b":") for h in head.split(b"\r\n"))
            if n.strip().lower() == b"content-length"
        ),
        0,
    )
    await reader.readexactly(length)
    writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
    await writer.drain()
    writer.close()


async def _mean_us(rounds: int, call: Any) -> float:
    start = time.perf_counter()
    for _ in range(rounds):
        await call()
    return (time.perf_counter() - start) / rounds * 1e6


async def measure(url: str, rounds: int) -> dict[str, float]:
    cluster = url.startswith("postgresql")
    overrides = {"push_notifications": True, "push_allow_insecure_urls": True}
    settings = Settings.resolve({**overrides, "cluster": cluster}, environ={})
    stores = open_stores(url, settings)
    kit = build_push(
        settings,
        config_store=stores.push_config_store,
        agent_url="http://a",
        engine=stores.engine,
        slots=stores.quota_slots,
    )
    server = await asyncio.start_server(_answer_204, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    await stores.start()
    await kit.start()
    try:
        task_id = "bench-task"
        config = TaskPushNotificationConfig(id="c", url=f"http://127.0.0.1:{port}/hook")
        await kit.config_store.set_info(task_id, config, ServerCallContext())
        event = TaskStatusUpdateEvent(
            task_id=task_id, context_id="ctx", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)
        )
        sender = kit.sender
        statements = [0]
        if stores.engine is not None:

            def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
                # Not the cluster's heartbeats (timed), nor SQLite's BEGIN before each read.
                statements[0] += "push_" in statement

            listen(stores.engine.sync_engine, "before_cursor_execute", count)
        reads = [0]
        store = kit.config_store
        for name in ("get_info_for_dispatch", "now"):
            read = getattr(store, name)

            async def counted(*args: Any, _read: Any = read) -> Any:
                reads[0] += 1
                return await _read(*args)

            setattr(store, name, counted)  # on the instance: this process only
        per = {"event": [0, 0], "attempt": [0, 0]}

        async def deliver() -> None:
            for phase, step in (
                ("event", lambda: sender.send_notification(task_id, event)),
                ("attempt", sender.idle),
            ):
                before = statements[0], reads[0]
                await step()
                per[phase][0] += statements[0] - before[0]
                per[phase][1] += reads[0] - before[1]

        reread = await _mean_us(rounds, lambda: kit.config_store.get_info_for_dispatch(task_id))
        records = await _mean_us(rounds, lambda: store.now(task_id))
        delivery = await _mean_us(rounds, deliver)
        assert sender.sent == rounds, (sender.sent, sender.failed, sender.dropped)
    finally:
        await kit.aclose()
        await stores.aclose()
        server.close()
    counts = {
        f"{k}_{p}": v[i] / rounds for p, v in per.items() for i, k in enumerate(("sql", "reads"))
    }
    return {"reread_us": reread, "records_us": records, "delivery_us": delivery, **counts}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    rounds = parser.parse_args().rounds
    kinds = ["memory", "sqlite"] + (["postgresql"] if postgres_reachable() else [])
    print(f"rounds={rounds}")
    for kind in kinds:
        with fresh_store(kind) as url:
            m = asyncio.run(measure(url, rounds))
        share = m["records_us"] / m["delivery_us"] * 100
        print(
            f"{kind:10s} configs read {m['reread_us']:8.1f} us | with records "
            f"{m['records_us']:8.1f} us | whole delivery {m['delivery_us']:8.1f} us | "
            f"an attempt's read = {share:4.1f}% of a delivery | per event: "
            f"{m['reads_event']:.2f} reads, {m['sql_event']:.2f} SQL | per attempt: "
            f"{m['reads_attempt']:.2f} reads, {m['sql_attempt']:.2f} SQL"
        )


if __name__ == "__main__":
    main()
