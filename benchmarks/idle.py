"""What idle cluster subscribers cost the database: transactions per second.

``python -m benchmarks.idle [--subscribers 0,50,500] [--seconds 10]``

Two replicas A and B (``--cluster``, default settings: wake-ups on, poll interval 0.5 s)
on a PostgreSQL database private to the run. For each count N, N tasks are parked in
``input-required`` on A (``bank.transfer``) and B holds one ``SubscribeToTask`` stream
of each; nothing happens to them. The figure is the database's transactions per second
(``pg_stat_database`` commits + rollbacks) while they wait: the replicas' heartbeats, plus
whatever waiting costs. :func:`idle_rates` is the measurement, for the growth table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.cluster_streams import _idle_tps, _replica, _store

V10 = {"A2A-Version": "1.0"}


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    """The replicas started inside take *values* as environment variables."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


async def _rpc(http: Any, url: str, method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
    return (await http.post(url + "/", json=body, headers=V10)).json()


@contextlib.asynccontextmanager
async def _waiting(a: str, b: str, count: int) -> AsyncIterator[None]:
    """*count* tasks parked on A, each followed by one stream on B that is read as it
    comes (a stream nobody reads stops its server-side loop at the socket)."""
    import httpx

    limits = httpx.Limits(max_connections=count + 10)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        opened = asyncio.Semaphore(0)

        async def follow(task_id: str) -> None:
            body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask"}
            body["params"] = {"id": task_id}
            async with http.stream("POST", b + "/", json=body, headers=V10) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        opened.release()

        parked = []
        for _ in range(count):
            message = {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"data": {"to": "acct-9", "amount": 500}}],
                "metadata": {"skillId": "bank.transfer"},
            }
            answer = await _rpc(http, a, "SendMessage", {"message": message})
            parked.append(answer["result"]["task"]["id"])
        readers = [asyncio.ensure_future(follow(task_id)) for task_id in parked]
        try:
            for _ in parked:
                await asyncio.wait_for(opened.acquire(), 60)
            yield
        finally:
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)


async def _rates(
    a: str, b: str, database: str, counts: Sequence[int], seconds: float
) -> dict[int, float]:
    rates = {}
    for count in counts:
        async with _waiting(a, b, count):
            # Backends report their counters up to 10 s after going idle: let the work
            # of opening the streams be counted first.
            await asyncio.sleep(11)
            rates[count] = await _idle_tps(database, seconds)
    return rates


def idle_rates(counts: Sequence[int] = (0, 50, 500), seconds: float = 10.0) -> dict[int, float]:
    """Idle transactions per second of two PostgreSQL replicas, per subscriber count."""
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        url, database = stack.enter_context(_store("postgresql", Path(tmp)))
        assert database is not None
        stack.enter_context(
            _environ(
                A2A_MAX_STREAMS=str(max(counts) + 10),
                A2A_MAX_UNFINISHED_TASKS_PER_CALLER="0",
            )
        )
        a = stack.enter_context(_replica(url, True))
        b = stack.enter_context(_replica(url, True))
        return asyncio.run(_rates(a, b, database, counts, seconds))


def table(rates: dict[int, float]) -> str:
    """The growth table's row: idle transactions/s per number of subscribers."""
    head = " | ".join(f"{n} subscribers" for n in rates)
    cells = " | ".join(f"{r:.1f}" for r in rates.values())
    rule = "|---" * (len(rates) + 1)
    return f"| measure | {head} |\n{rule}|\n| idle transactions/s (PostgreSQL) | {cells} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.idle", description=__doc__)
    parser.add_argument("--subscribers", default="0,50,500")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.subscribers.split(",")]
    print(table(idle_rates(counts, args.seconds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
