"""What a sender records on giving up holds only for the config it gave up on, and a
config's deliveries follow its protocol version.

Its failure record could land after the config was replaced and fail the new one; and a
config registered again under the other protocol version kept getting bodies of the
version it had.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.types import TaskPushNotificationConfig

from apcore_a2a.push.status import ConfigStatusBook, aim, create_tables
from apcore_a2a.storage._urls import create_engine, parse_store_url

from .._postgres import store_url
from ._agent import GATES, rpc, skill_message, statuses, two_replicas
from ._hostile import hostile
from ._statements import hold, in_worker, watching

_gates = itertools.count(3000)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def book(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ConfigStatusBook]:
    if request.param == "memory":
        yield ConfigStatusBook()
        return
    with store_url(request.param, tmp_path) as url:
        engine = create_engine(parse_store_url(url))
        try:
            await create_tables(engine)
            yield ConfigStatusBook(engine)
        finally:
            await engine.dispose()


def _gate() -> tuple[int, asyncio.Event]:
    n = next(_gates)
    GATES[n] = asyncio.Event()
    return n, GATES[n]


def _gated(n: int, hook: dict[str, str]) -> dict[str, object]:
    config = {"returnImmediately": True, "taskPushNotificationConfig": hook}
    return {"message": skill_message("demo.gate", n), "configuration": config}


async def test_a_late_failure_of_the_replaced_config_does_not_fail_the_new_one(
    pg_store: str,
) -> None:
    # Replica A gives up on the old webhook and writes its failure record just as replica
    # B replaces the config: held here between A's last look at the config and its write.
    # The record used to land on the config B had stored, whose events were then dropped.
    # (PostgreSQL: on SQLite a statement held here would hold the file's write lock.)
    once = {"push_retry_delays": (), "push_timeout": 30.0, "shutdown_timeout": 1.0}
    held, go = asyncio.Event(), asyncio.Event()

    def hold_the_record(statement: str) -> None:
        if in_worker() and "apcore_a2a_push_failed" in statement and not held.is_set():
            held.set()
            hold(go)

    async with hostile("stall") as old, two_replicas(pg_store, **once) as r:
        sender = r.a.state.a2a.extras["push"].sender
        n, gate = _gate()
        send = _gated(n, {"id": "c", "url": old.url})
        task_id = (await rpc(r.client, r.base_a, "SendMessage", send))["result"]["task"]["id"]
        await old.wait_for(lambda: len(old.conns) == 1)  # A's POST, in flight
        with watching(hold_the_record):
            old.release()  # the old webhook hangs up: A gives up on it
            await asyncio.wait_for(held.wait(), timeout=10)
            config = {"taskId": task_id, "id": "c", "url": r.rec.url("/new")}
            reply = await rpc(r.client, r.base_b, "CreateTaskPushNotificationConfig", config)
            assert "result" in reply, reply
            go.set()
            await asyncio.wait_for(sender.idle(), timeout=10)
        assert await statuses(r.client, r.base_b, task_id) == {"c": ("active", None)}
        gate.set()  # the task's next event goes to the new webhook (was: dropped)
        await r.rec.wait_for(lambda: any(b"COMPLETED" in d.body for d in r.rec.accepted("/new")))


async def test_a_failure_counts_only_for_the_config_it_was_recorded_for(
    book: ConfigStatusBook,
) -> None:
    old = TaskPushNotificationConfig(id="c", url="https://a.example/h", token="t1")
    new = TaskPushNotificationConfig(id="c", url="https://a.example/h", token="t2")
    await book.fail("t", "c", aim(old, "1.0"), "receiver answered HTTP 401")
    assert await book.of("t", [new]) == {"c": (aim(new, "1.0"), None)}
    assert await book.of("t", [old]) == {"c": (aim(old, "1.0"), "receiver answered HTTP 401")}
    await book.set_version("t", "c", "0.3")  # registered again, unchanged but for this
    assert await book.of("t", [old]) == {"c": (aim(old, "0.3"), None)}
    (stored,) = (await book.failed.read("t")).values()
    assert "t1" not in stored  # the token is not kept in the clear beside the config


@pytest.mark.parametrize("where", ["here", "elsewhere"])
async def test_a_config_registered_again_under_0_3_gets_no_more_1_0_bodies(
    tmp_path: Path, where: str
) -> None:
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    retrying = {"push_retry_delays": (0.1,) * 30, "shutdown_timeout": 1.0}
    async with two_replicas(url, **retrying) as r:
        r.rec.always["/v"] = 500  # the 1.0 events wait in A's queue, retried
        sender = r.a.state.a2a.extras["push"].sender
        n, gate = _gate()
        send = _gated(n, {"id": "v", "url": r.rec.url("/v")})
        task_id = (await rpc(r.client, r.base_a, "SendMessage", send))["result"]["task"]["id"]
        await r.rec.wait_for(lambda: len(r.rec.attempts("/v")) >= 2)
        again = {"taskId": task_id, "pushNotificationConfig": {"id": "v", "url": r.rec.url("/v")}}
        base = r.base_a if where == "here" else r.base_b
        assert "result" in await rpc(
            r.client, base, "tasks/pushNotificationConfig/set", again, version="0.3"
        )
        gate.set()
        # Elsewhere, A learns the version with the task's next event: once that event's 0.3
        # body is being posted, what A had queued under 1.0 is gone.
        await r.rec.wait_for(lambda: any(b'"kind":"task"' in d.body for d in r.rec.log))
        del r.rec.always["/v"]
        await r.rec.wait_for(lambda: any(b"completed" in d.body for d in r.rec.accepted("/v")))
        await asyncio.wait_for(sender.idle(), timeout=10)
    shapes = {json.loads(d.body).get("kind") for d in r.rec.accepted("/v")}
    assert shapes == {"task"}  # 0.3 only (was: the queued 1.0 events too)
