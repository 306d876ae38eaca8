"""A push config deleted on replica A while replica B registers the same id again: two
real agent processes on one PostgreSQL schema.

Made to happen every time: the test's own session locks the config's row, A's delete
waits for it, then B's registration (which read the config as stored, so took no cap
slot of its own) waits behind A's. Released, A deletes the row and gives the config's
slot back; B writes the row again. Before: the config stayed stored without a slot of
its task's ``push_max_configs_per_task`` in ``apcore_a2a_quota_slots``, so the cluster's
count of the task's configs was one short from then on (two registrations of the last
free place both refused, a leak the other way once the count came back). Each
registration and deletion now settles the config's slot after its write, one at a time
across processes (``SqlQuotaSlots.settle``): the last one reads the last write. And A's
delete forgot the config's records (its protocol version) after the row: B's 0.3
registration was read as 1.0 from then on; the delete forgets them after the row only
if the config was not stored again, and a registration writes its version again once
stored.

Two more ends of a 0.3 config's records, one agent each: a delete whose process is killed
(SIGKILL) at its row delete, and a registration whose database connection is lost after
the config was stored (at its slot's settle). Before, each forgot the config's protocol
version though the config stayed stored: read as 1.0, 1.0 bodies to its 0.3 receiver.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any

import httpx
import pytest

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, kill_slot_renames, pg_schema_url
from .._support import EXAMPLES, TLS, cli_server
from ._agent import GATES, push_agent, receiver, rpc, skill_message, statuses

HOOK = "http://127.0.0.1:9/hook"
CREATE = "CreateTaskPushNotificationConfig"
SET_03 = "tasks/pushNotificationConfig/set"
HOOK_03 = {"id": "hook", "url": HOOK}
# The sessions waiting, directly or in a lock's queue, for the one whose pid is $1 (the
# test's own): the server is shared with other tests, whose lock waits must be neither
# waited for nor terminated.
BLOCKED = """
    WITH RECURSIVE waiting(pid) AS (
        SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))
        UNION
        SELECT a.pid FROM pg_stat_activity a JOIN waiting w ON w.pid = ANY(pg_blocking_pids(a.pid))
    )
    SELECT pid FROM waiting
"""


@pytest.fixture(scope="module")
def replicas() -> Iterator[tuple[str, str, str]]:
    """Replicas A and B (base URLs) of one agent, and the schema they share."""
    with pg_schema_url(agents=2) as url:
        args = ["--extensions-dir", str(EXAMPLES / "extensions"), "--task-store", url]
        args += ["--cluster", "--push-notifications", "--push-allow-insecure-urls"]
        with cli_server(args) as (a, _pa), cli_server(args) as (b, _pb):
            yield a, b, url.rsplit("schema=", 1)[1]


async def _parked(client: httpx.AsyncClient, replica: str) -> str:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"to": "bob", "amount": 5}, "mediaType": "application/json"}],
        "metadata": {"skillId": "bank.transfer"},
    }
    task = (await rpc(client, replica, "SendMessage", {"message": message}))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    return str(task["id"])


@contextlib.asynccontextmanager
async def _session() -> AsyncIterator[Any]:
    """The test's own connection to the agents' database."""
    asyncpg = pytest.importorskip("asyncpg")
    session = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        yield session
    finally:
        await session.close()


@contextlib.asynccontextmanager
async def _started(call: Coroutine[Any, Any, Any]) -> AsyncIterator[asyncio.Future[Any]]:
    """*call* running beside the block, ended with it: a test that fails while a call
    hangs leaves no task whose error asyncio logs later, in another test's log."""
    running = asyncio.ensure_future(call)
    try:
        yield running
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def _lock_config(session: Any, schema: str, task_id: str) -> None:
    """Open a transaction holding config ``hook``'s row: a delete of it waits there."""
    await session.execute("BEGIN")
    await session.execute(
        f"SELECT 1 FROM {schema}.push_notification_configs "
        "WHERE task_id = $1 AND config_id = 'hook' FOR UPDATE",
        task_id,
    )


async def _stored(session: Any, schema: str, task_id: str) -> tuple[int, str | None]:
    """How many configs *task_id* has stored, and the protocol version recorded for them."""
    configs = f"SELECT count(*) FROM {schema}.push_notification_configs WHERE task_id = $1"
    version = (
        f"SELECT protocol_version FROM {schema}.apcore_a2a_push_config_versions WHERE task_id = $1"
    )
    return await session.fetchval(configs, task_id), await session.fetchval(version, task_id)


async def _slots(session: Any, schema: str, task_id: str) -> int:
    query = f"SELECT count(*) FROM {schema}.apcore_a2a_quota_slots WHERE scope = 'push' "
    return int(await session.fetchval(query + "AND subject = $1", task_id))


async def _waiting(session: Any, running: asyncio.Future[Any], count: int = 1) -> list[Any]:
    """The sessions waiting for the test's *session*, once there are *count* (*running*
    among them: A's delete waits for the test's lock, B's write for A's delete, as the
    second in a row lock's queue waits for the first). Read on a connection of its own:
    a session sees ``pg_stat_activity`` as it was at its transaction's first look, so an
    agent connection opened later (from the pool, under load) was never seen waiting."""
    import asyncpg

    probe = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        holder = await session.fetchval("SELECT pg_backend_pid()")
        async with asyncio.timeout(120):  # a hang guard
            while len(pids := await probe.fetch(BLOCKED, holder)) < count:
                assert not running.done(), f"a call never waited: {running.result()!r}"
                await asyncio.sleep(0.02)
    finally:
        await probe.close()
    return list(pids)


async def _race(
    client: httpx.AsyncClient, session: Any, schema: str, a: str, b: str, task_id: str, **v: str
) -> None:
    """A's delete of config ``hook`` and B's registration of it again, made to meet (the
    module docstring); *v*: B's ``version`` (1.0 by default)."""
    await _lock_config(session, schema, task_id)
    delete = {"taskId": task_id, "id": "hook"}
    if v.get("version") == "0.3":
        method, config = SET_03, {"taskId": task_id, "pushNotificationConfig": HOOK_03}
    else:
        method, config = CREATE, {"taskId": task_id, "id": "hook", "url": HOOK}
    async with _started(rpc(client, a, "DeleteTaskPushNotificationConfig", delete)) as deleted:
        await _waiting(session, deleted)
        async with _started(rpc(client, b, method, config, **v)) as created:
            await _waiting(session, created, 2)
            await session.execute("ROLLBACK")
            assert "result" in await deleted, deleted.result()
            assert "result" in await created, created.result()
    listed = await rpc(client, b, "ListTaskPushNotificationConfigs", {"taskId": task_id})
    assert [c["id"] for c in listed["result"]["configs"]] == ["hook"], listed


async def test_a_config_registered_again_while_deleted_elsewhere_keeps_its_slot(
    replicas: tuple[str, str, str],
) -> None:
    a, b, schema = replicas
    async with httpx.AsyncClient(timeout=60, verify=TLS) as client, _session() as session:
        task_id = await _parked(client, a)
        config = {"taskId": task_id, "id": "hook", "url": HOOK}
        assert "result" in await rpc(client, a, CREATE, config)
        assert await _slots(session, schema, task_id) == 1
        await _race(client, session, schema, a, b, task_id)
        # The stored config holds its slot (was: none).
        assert await _slots(session, schema, task_id) == 1
        # And the delete frees it.
        delete = {"taskId": task_id, "id": "hook"}
        assert "result" in await rpc(client, b, "DeleteTaskPushNotificationConfig", delete)
        assert await _slots(session, schema, task_id) == 0


async def test_a_config_registered_again_under_0_3_while_deleted_elsewhere_keeps_it(
    replicas: tuple[str, str, str],
) -> None:
    """B registers the config again from a 0.3 client: its deliveries must carry 0.3
    bodies. Before: A's delete dropped the config's version record after its row delete,
    so after B's registration, read as 1.0: 1.0 bodies to a 0.3 receiver."""
    a, b, schema = replicas
    async with httpx.AsyncClient(timeout=60, verify=TLS) as client, _session() as session:
        task_id = await _parked(client, a)
        config = {"taskId": task_id, "id": "hook", "url": HOOK}
        assert "result" in await rpc(client, a, CREATE, config)
        await _race(client, session, schema, a, b, task_id, version="0.3")
        assert await _stored(session, schema, task_id) == (1, "0.3")


def _one_agent(url: str, *more: str) -> list[str]:
    args = ["--extensions-dir", str(EXAMPLES / "extensions"), "--task-store", url, *more]
    return [*args, "--push-notifications", "--push-allow-insecure-urls"]


async def test_a_0_3_config_whose_delete_died_keeps_its_version() -> None:
    """The test's session holds the config's row, so the delete waits at its row delete
    when its process is killed; the config stays stored, and so does its 0.3 version."""
    with pg_schema_url(agents=2) as url, cli_server(_one_agent(url)) as (a, pa):
        schema = url.rsplit("schema=", 1)[1]
        async with httpx.AsyncClient(timeout=60, verify=TLS) as client, _session() as session:
            task_id = await _parked(client, a)
            config = {"taskId": task_id, "pushNotificationConfig": HOOK_03}
            assert "result" in await rpc(client, a, SET_03, config, version="0.3")
            await _lock_config(session, schema, task_id)
            await _killed_deleting(client, a, session, task_id, pa)
            assert await _stored(session, schema, task_id) == (1, "0.3")  # was: None, 1.0


async def _killed_deleting(client: Any, a: str, session: Any, task_id: str, pa: Any) -> None:
    """Delete config ``hook`` on agent *a* (process *pa*) while the test's *session* holds
    what the delete waits for; kill *a* in that wait, then let go: no answer comes."""
    delete = {"taskId": task_id, "id": "hook"}
    method = "DeleteTaskPushNotificationConfig"
    async with _started(rpc(client, a, method, delete)) as deleted:
        await _waiting(session, deleted)
        pa.kill9()
        pa.wait()
        await session.execute("ROLLBACK")
        with pytest.raises(httpx.HTTPError):
            await deleted


async def _hold_turn(session: Any, schema: str, task_id: str) -> None:
    """Open a transaction holding the settle's turn row of config ``hook``
    (``SqlQuotaSlots.settle``): a registration or deletion of it waits there, its row
    written."""
    holder = "c:" + hashlib.sha256(f"{task_id}\nhook".encode()).hexdigest()
    await session.execute("BEGIN")
    await session.execute(
        f"INSERT INTO {schema}.apcore_a2a_quota_slots "
        "(scope, subject, slot, holder) VALUES ('push:turn', $1, 0, '')",
        holder,
    )


async def test_a_0_3_config_stored_before_an_outage_keeps_its_version() -> None:
    """The test's session holds the settle's turn row (``SqlQuotaSlots.settle``), so the
    registration waits there with its config stored, and the test ends the waiting
    session: answered as the store being unavailable, the config stays stored with its
    0.3 version."""
    with pg_schema_url() as url, cli_server(_one_agent(url, "--cluster")) as (a, _pa):
        schema = url.rsplit("schema=", 1)[1]
        async with httpx.AsyncClient(timeout=60, verify=TLS) as client, _session() as session:
            task_id = await _parked(client, a)
            await _hold_turn(session, schema, task_id)
            config = {"taskId": task_id, "pushNotificationConfig": HOOK_03}
            async with _started(rpc(client, a, SET_03, config, version="0.3")) as answer:
                for row in await _waiting(session, answer):
                    await session.execute("SELECT pg_terminate_backend($1)", row["pid"])
                await session.execute("ROLLBACK")
                error = (await answer).get("error")
            assert error is not None and error["code"] != -32603, error
            assert await _stored(session, schema, task_id) == (1, "0.3")  # was: None, 1.0


async def test_a_delivery_failed_while_its_config_registers_keeps_the_failure() -> None:
    """The registration of ``hook`` on a running task waits at its slot's settle (the test
    holds the turn row), the config stored; the task finishes meanwhile and the config's
    receiver answers 410. Before, the registration then cleared the config's failure (as
    registering again does), this one too: read ``active``, and the task's next events
    posted again to a receiver that had said Gone. Seen under load, without the wait."""
    with pg_schema_url() as url:
        schema = url.rsplit("schema=", 1)[1]
        async with (
            receiver(always={"/h": 410}) as rec,
            push_agent(task_store=url, cluster=True, shutdown_timeout=1.0) as (base, app),
            httpx.AsyncClient(timeout=60, verify=TLS) as client,
            _session() as session,
        ):
            GATES[7001] = gate = asyncio.Event()
            send = {"message": skill_message("demo.gate", 7001), "configuration": {}}
            send["configuration"]["returnImmediately"] = True
            task_id = (await rpc(client, base, "SendMessage", send))["result"]["task"]["id"]
            await _hold_turn(session, schema, task_id)
            config = {"taskId": task_id, "id": "hook", "url": rec.url("/h")}
            async with _started(rpc(client, base, CREATE, config)) as created:
                await _waiting(session, created)
                gate.set()
                await rec.wait_for(lambda: rec.attempts("/h"))
                await app.state.a2a.extras["push"].sender.idle()
                await session.execute("ROLLBACK")
                assert "result" in await created, created.result()
            status = await statuses(client, base, task_id)
    assert status == {"hook": ("failed", "receiver answered HTTP 410")}, status  # was: active


async def test_a_config_whose_delete_died_at_its_settle_leaves_no_slot_taken() -> None:
    """A task may have one config. The delete of ``hook`` on A waits at its slot's settle
    (the test holds the turn row), the row deleted, when A is killed. Before, the slot
    stayed taken for the task's life (a settled slot names no replica, so none reclaims
    it): B refused every other config of the task as over the cap, though it had none."""
    async with pg_schema_url(agents=2) as url:
        env = {"A2A_PUSH_MAX_CONFIGS_PER_TASK": "1"}
        args = _one_agent(url, "--cluster")
        with cli_server(args, env=env) as (a, pa), cli_server(args, env=env) as (b, _pb):
            schema = url.rsplit("schema=", 1)[1]
            async with httpx.AsyncClient(timeout=60, verify=TLS) as client, _session() as session:
                task_id = await _parked(client, a)
                assert "result" in await rpc(client, a, CREATE, {"taskId": task_id, **HOOK_03})
                await _hold_turn(session, schema, task_id)
                await _killed_deleting(client, a, session, task_id, pa)
                assert (await _stored(session, schema, task_id))[0] == 0
                other = {"taskId": task_id, "id": "other", "url": HOOK}
                created = await rpc(client, b, CREATE, other)
                assert "result" in created, created  # was: -32091, over the cap for good
                assert await _slots(session, schema, task_id) == 1


async def test_a_config_whose_slot_rename_failed_leaves_no_slot_taken() -> None:
    """A task may have one config. Registering ``hook``, the rename of the request's slot
    to the config's is dropped by the database (its connection ended): answered as the
    store being unavailable, the config stored. Before, the slot stayed under the
    request's name, which nothing gives back: once ``hook`` was deleted, every other
    config of the task was refused as over the cap for that replica's life. Now the slot
    is the config's, freed with it."""
    async with pg_schema_url() as url:
        env = {"A2A_PUSH_MAX_CONFIGS_PER_TASK": "1"}
        with cli_server(_one_agent(url, "--cluster"), env=env) as (a, _pa):
            schema = url.rsplit("schema=", 1)[1]
            async with httpx.AsyncClient(timeout=60, verify=TLS) as client, _session() as session:
                task_id = await _parked(client, a)
                await kill_slot_renames(schema, "push", True)
                answer = await rpc(client, a, CREATE, {"taskId": task_id, **HOOK_03})
                await kill_slot_renames(schema, "push", False)
                assert answer.get("error", {}).get("code") == -32092, answer
                assert (await _stored(session, schema, task_id))[0] == 1
                delete = {"taskId": task_id, "id": "hook"}
                assert "result" in await rpc(client, a, "DeleteTaskPushNotificationConfig", delete)
                other = {"taskId": task_id, "id": "other", "url": HOOK}
                created = await rpc(client, a, CREATE, other)
                assert "result" in created, created  # was: -32091, over the cap
                assert await _slots(session, schema, task_id) == 1
