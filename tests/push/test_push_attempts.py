"""Each delivery attempt checks, once and at the right moment, that its config is still the
one stored, and what it records on giving up holds only for that config.

It used to read the store twice for an attempt (a failure record, then the configs), before
waiting for its slot (a config deleted meanwhile on another replica was still posted to);
a store outage at that read lost the delivery with a traceback; its failure record could
land after the config was replaced and fail the new one; and a config registered again
under the other protocol version kept getting bodies of the version it had.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from a2a.types import TaskPushNotificationConfig
from sqlalchemy import select

from apcore_a2a.push.status import ConfigStatusBook, aim, create_tables, failed_configs
from apcore_a2a.storage._urls import create_engine, parse_store_url
from tests._support import TLS

from .._postgres import store_url
from ._agent import GATES, push_agent, receiver, rpc, skill_message, statuses, two_replicas
from ._hostile import hostile
from ._statements import PUSH_TABLES, hold, in_worker, watching

_gates = itertools.count(3000)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def book(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ConfigStatusBook]:
    if request.param == "memory":
        yield ConfigStatusBook()
        return
    async with store_url(request.param, tmp_path) as url:
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


async def test_an_attempt_reads_the_store_once(sql_store: str) -> None:
    reads: list[str] = []

    def count(statement: str) -> None:
        if in_worker() and PUSH_TABLES.search(statement):
            reads.append(statement)

    fast = {"push_retry_delays": (0.05,) * 3, "task_store": sql_store}
    async with (
        receiver(fail_first={"/h": 2}) as rec,
        push_agent(**fast) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        sender = app.state.a2a.extras["push"].sender
        with watching(count):
            send = {"message": skill_message("demo.chunks", 3), "configuration": {}}
            send["configuration"]["taskPushNotificationConfig"] = {"id": "h", "url": rec.url("/h")}
            assert "result" in await rpc(client, base, "SendMessage", send)
            await rec.wait_for(lambda: any(b"COMPLETED" in d.body for d in rec.accepted("/h")))
            await asyncio.wait_for(sender.idle(), timeout=10)
    attempts = len(rec.attempts("/h"))
    assert attempts == len(rec.accepted("/h")) + 2  # two retried
    assert len(reads) == attempts, reads  # was: one more per delivery (its failure record)


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


@pytest.mark.parametrize("secret", [None, "k" * 43 + "="])
async def test_a_failure_record_keeps_no_token_and_confirms_no_token_guess(
    tmp_path: Path, secret: str | None
) -> None:
    # The record beside the config is not encrypted: it holds a salted digest, not the
    # token. Where the configs are encrypted, it must not open a check of a guessed token
    # that anyone reading the table could run either: the digest is keyed.
    config = TaskPushNotificationConfig(id="c", url="https://a.example/h", token="1234")
    failed = {"c": (aim(config, "1.0"), "receiver answered HTTP 401")}
    engine = create_engine(parse_store_url(f"sqlite:///{tmp_path / 'tasks.db'}"))
    try:
        await create_tables(engine)
        book = ConfigStatusBook(engine, secret=secret)
        await book.fail("t", "c", aim(config, "1.0"), "receiver answered HTTP 401")
        assert await book.of("t", [config]) == failed
        async with engine.connect() as conn:
            stored = (await conn.execute(select(failed_configs.c.reason))).scalars().all()
        # what a reader without the key can compute, or with another key
        others = [ConfigStatusBook(engine, secret=s) for s in (None, "j" * 43 + "=") if s != secret]
        seen = [await other.of("t", [config]) for other in others]
    finally:
        await engine.dispose()
    assert len(stored) == 1
    assert "1234" not in stored[0]
    assert seen == [{"c": (aim(config, "1.0"), None)}] * len(others)


async def test_a_store_outage_at_an_attempt_retries_it_on_a_warning_line(
    sql_store: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="apcore_a2a")
    failed: list[str] = []

    def fail_once(statement: str) -> None:
        if in_worker() and "push_notification_configs" in statement and not failed:
            failed.append(statement)
            raise ConnectionResetError("the database went away")

    fast = {"push_retry_delays": (0.05,), "task_store": sql_store}
    async with (
        receiver() as rec,
        push_agent(**fast) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        sender = app.state.a2a.extras["push"].sender
        with watching(fail_once):
            send = {"message": skill_message("demo.chunks", 2), "configuration": {}}
            send["configuration"]["taskPushNotificationConfig"] = {"id": "h", "url": rec.url("/h")}
            assert "result" in await rpc(client, base, "SendMessage", send)
            await rec.wait_for(lambda: any(b"COMPLETED" in d.body for d in rec.accepted("/h")))
            await asyncio.wait_for(sender.idle(), timeout=10)
    assert failed
    assert (sender.retried, sender.dropped, sender.failed) == (1, 0, 0)
    assert sender.sent == len(rec.accepted("/h")) == len(rec.attempts("/h"))
    push = [r for r in caplog.records if r.name.startswith("apcore_a2a")]
    assert not [r for r in push if r.exc_info or r.levelno >= logging.ERROR]  # was: lost
    (line,) = [r.getMessage() for r in push if "push configs unreadable" in r.getMessage()]
    assert "retry 1/1" in line


async def test_a_config_deleted_on_another_replica_while_waiting_for_a_slot_gets_nothing(
    tmp_path: Path,
) -> None:
    # One caller, two slots in all: its share is one, held by a POST to a stalled webhook.
    # Its delivery for another task waits for that slot; replica B deletes that config.
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    tight = {"push_max_deliveries": 2, "push_retry_delays": (), "shutdown_timeout": 1.0}
    async with hostile("stall") as stall, two_replicas(url, **tight) as r:
        sender = r.a.state.a2a.extras["push"].sender
        n, gate = _gate()
        await rpc(r.client, r.base_a, "SendMessage", _gated(n, {"id": "s", "url": stall.url}))
        await stall.wait_for(lambda: len(stall.conns) == 1)
        m, later = _gate()
        send = _gated(m, {"id": "w", "url": r.rec.url("/w")})
        task_id = (await rpc(r.client, r.base_a, "SendMessage", send))["result"]["task"]["id"]
        async with asyncio.timeout(10):
            while not sender.waiting:
                await asyncio.sleep(0.01)  # no event: the wait is inside the sender
        deleted = {"taskId": task_id, "id": "w"}
        assert "result" in await rpc(
            r.client, r.base_b, "DeleteTaskPushNotificationConfig", deleted
        )
        stall.release()
        await asyncio.wait_for(sender.idle(), timeout=10)
        gate.set()
        later.set()
    assert r.rec.attempts("/w") == []  # was: posted once the slot was free
    assert sender.waiting == 0


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
