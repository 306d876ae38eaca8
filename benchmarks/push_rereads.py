"""What reading a push config again before each delivery attempt costs (``push/sender.py``:
a config deleted or replaced on another replica, or gone with its task, ends its
deliveries at the next attempt).

``python -m benchmarks.push_rereads [--rounds 2000]``

For each store (memory, a SQLite file, a PostgreSQL schema in cluster mode) a task with
one config, then, in this process: *rounds* reads of its configs as the sender now makes
before each attempt (``get_info_for_dispatch``), *rounds* reads of its failure record (a
read each delivery made until the failures were read with each event's versions), and
*rounds* whole deliveries (``send_notification`` then ``idle``: serialize, queue, the
reads, a signed POST to a receiver on 127.0.0.1 that answers 204). The figures are the
mean microseconds of each, and the added read as a share of a delivery.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.types import TaskPushNotificationConfig, TaskState, TaskStatus, TaskStatusUpdateEvent

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

        async def deliver() -> None:
            await sender.send_notification(task_id, event)
            await sender.idle()

        reread = await _mean_us(rounds, lambda: kit.config_store.get_info_for_dispatch(task_id))
        failed = await _mean_us(rounds, lambda: kit.statuses.failed.read(task_id))
        delivery = await _mean_us(rounds, deliver)
        assert sender.sent == rounds, (sender.sent, sender.failed, sender.dropped)
    finally:
        await kit.aclose()
        await stores.aclose()
        server.close()
    return {"reread_us": reread, "failed_read_us": failed, "delivery_us": delivery}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    rounds = parser.parse_args().rounds
    kinds = ["memory", "sqlite"] + (["postgresql"] if postgres_reachable() else [])
    print(f"rounds={rounds}")
    for kind in kinds:
        with fresh_store(kind) as url:
            m = asyncio.run(measure(url, rounds))
        share = m["reread_us"] / m["delivery_us"] * 100
        print(
            f"{kind:10s} config re-read {m['reread_us']:8.1f} us | failure-record read "
            f"{m['failed_read_us']:8.1f} us | whole delivery {m['delivery_us']:8.1f} us | "
            f"re-read = {share:4.1f}% of a delivery"
        )


if __name__ == "__main__":
    main()
