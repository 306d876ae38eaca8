"""Configs are owner-scoped, survive a restart on SQLite (with their status and the
generated signing key), and can be encrypted at rest."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet

from apcore_a2a import A2AServerFactory
from apcore_a2a.push import JWKS_PATH
from tests._support import TLS

from ._agent import (
    GATES,
    V1,
    add_message,
    demo_registry,
    push_agent,
    receiver,
    rpc,
    skill_message,
    statuses,
)

ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef00"


async def test_configs_are_invisible_to_other_identities() -> None:
    async with (
        push_agent(api_keys=(f"{ALICE}=alice", f"{BOB}=bob")) as (base, _app),
        httpx.AsyncClient(timeout=10, verify=TLS) as alice,
        httpx.AsyncClient(timeout=10, verify=TLS) as bob,
        httpx.AsyncClient(timeout=10, verify=TLS) as anonymous,
    ):
        alice.headers["X-API-Key"] = ALICE
        bob.headers["X-API-Key"] = BOB
        reply = await rpc(alice, base, "SendMessage", {"message": add_message()})
        task_id = reply["result"]["task"]["id"]
        hook = "http://127.0.0.1:9/alice"
        created = await rpc(
            alice,
            base,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": "a1", "url": hook},
        )
        assert created["result"]["url"] == hook
        assert "status" not in created["result"]  # the owner reads it at /push/status

        # Bob cannot see, read, replace or delete alice's config, on any binding.
        for method, params, version in [
            ("ListTaskPushNotificationConfigs", {"taskId": task_id}, "1.0"),
            ("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "a1"}, "1.0"),
            (
                "CreateTaskPushNotificationConfig",
                {"taskId": task_id, "id": "a1", "url": "http://127.0.0.1:9/bob"},
                "1.0",
            ),
            ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "a1"}, "1.0"),
            ("tasks/pushNotificationConfig/list", {"id": task_id}, "0.3"),
        ]:
            denied = await rpc(bob, base, method, params, version=version)
            assert denied["error"]["code"] == -32001, (method, denied)
        rest = await bob.get(f"{base}/tasks/{task_id}/pushNotificationConfigs", headers=V1)
        assert rest.status_code == 404

        # Anonymous callers are turned away before reaching the configs.
        anon = await anonymous.post(
            base + "/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "ListTaskPushNotificationConfigs",
                "params": {"taskId": task_id},
            },
            headers=V1,
        )
        assert anon.status_code == 401

        # Alice still has exactly her config, unchanged.
        listed = await rpc(alice, base, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        assert [(c["id"], c["url"]) for c in listed["result"]["configs"]] == [("a1", hook)]

        # Webhook receivers hold no agent credentials: the JWKS is public.
        jwks = await anonymous.get(base + JWKS_PATH)
        assert jwks.status_code == 200
        assert jwks.json()["keys"]


async def test_configs_status_and_signing_key_survive_a_restart(sql_store: str) -> None:
    store = sql_store
    async with receiver(always={"/dead": 503}) as rec:
        async with (
            push_agent(task_store=store, push_retry_delays=(0.05,)) as (base, app),
            httpx.AsyncClient(timeout=10, verify=TLS) as client,
        ):
            reply = await rpc(
                client,
                base,
                "SendMessage",
                {
                    "message": add_message(),
                    "configuration": {
                        "taskPushNotificationConfig": {"id": "dead", "url": rec.url("/dead")}
                    },
                },
            )
            task_id = reply["result"]["task"]["id"]
            await rpc(
                client,
                base,
                "CreateTaskPushNotificationConfig",
                {"taskId": task_id, "id": "live", "url": rec.url("/live"), "token": "t"},
            )
            await app.state.a2a.extras["push"].sender.idle()
            kid_before = (await client.get(base + JWKS_PATH)).json()["keys"][0]["kid"]

        async with (
            push_agent(task_store=store) as (base, _app),
            httpx.AsyncClient(timeout=10, verify=TLS) as client,
        ):
            listed = await rpc(client, base, "ListTaskPushNotificationConfigs", {"taskId": task_id})
            configs = {c["id"]: c for c in listed["result"]["configs"]}
            assert set(configs) == {"dead", "live"}
            assert configs["live"]["url"] == rec.url("/live")
            assert configs["live"]["token"] == "t"
            assert await statuses(client, base, task_id) == {
                "dead": ("failed", "HTTP 503 (after 2 attempts)"),
                "live": ("active", None),
            }
            kid_after = (await client.get(base + JWKS_PATH)).json()["keys"][0]["kid"]
            assert kid_after == kid_before


async def test_encryption_at_rest_on_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "enc.db"
    key = Fernet.generate_key().decode()
    secret_url = "http://127.0.0.1:9/very-secret-hook-path"
    async with (
        push_agent(task_store=f"sqlite:///{db}", push_encryption_key=key) as (base, _app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        reply = await rpc(client, base, "SendMessage", {"message": add_message()})
        task_id = reply["result"]["task"]["id"]
        await rpc(
            client,
            base,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": "s", "url": secret_url, "token": "tok-secret"},
        )
        got = await rpc(
            client, base, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "s"}
        )
        assert got["result"]["url"] == secret_url

    raw = db.read_bytes()
    assert b"very-secret-hook-path" not in raw
    assert b"tok-secret" not in raw
    assert b"PRIVATE KEY" not in raw
    with sqlite3.connect(db) as conn:
        (stored,) = conn.execute("SELECT key_data FROM apcore_a2a_push_signing_keys").fetchone()
    assert stored.startswith("fernet:")

    # Without the key the stored signing key cannot be read: startup fails loudly.
    app, _card = A2AServerFactory(
        demo_registry(), environ={}, task_store=f"sqlite:///{db}", push_notifications=True
    ).create()
    with pytest.raises(RuntimeError, match="stored push signing key is encrypted"):
        async with app.router.lifespan_context(app):
            pass


@pytest.mark.parametrize(
    ("config_id", "problem"),
    [
        ("x" * 256, "id is longer than the store holds: at most 255 characters, got 256"),
        ("a\x00b", "id contains a NUL character"),
    ],
    ids=["256-chars", "nul"],
)
async def test_a_config_id_the_store_cannot_hold_is_refused_as_invalid_params(
    sql_store: str, config_id: str, problem: str
) -> None:
    # The SQL tables key configs by a VARCHAR(255) id, and PostgreSQL text holds no NUL:
    # such an id had failed the insert (-32603 "Internal error", REST 500) on PostgreSQL.
    expected = f"Invalid push notification config: {problem}"
    async with (
        push_agent(task_store=sql_store) as (base, _app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        reply = await rpc(client, base, "SendMessage", {"message": add_message()})
        task_id = reply["result"]["task"]["id"]
        config = {"id": config_id, "url": "http://127.0.0.1:9/hook"}
        created = await rpc(
            client, base, "CreateTaskPushNotificationConfig", {"taskId": task_id, **config}
        )
        assert (created["error"]["code"], created["error"]["message"]) == (-32602, expected)
        old = await rpc(
            client,
            base,
            "tasks/pushNotificationConfig/set",
            {"taskId": task_id, "pushNotificationConfig": config},
            version="0.3",
        )
        assert (old["error"]["code"], old["error"]["message"]) == (-32602, expected)
        rest = await client.post(
            f"{base}/tasks/{task_id}/pushNotificationConfigs", json=config, headers=V1
        )
        assert (rest.status_code, rest.json()["error"]["message"]) == (400, expected)
        riding = {"taskPushNotificationConfig": config}
        send = await rpc(
            client, base, "SendMessage", {"message": add_message(), "configuration": riding}
        )
        assert (send["error"]["code"], send["error"]["message"]) == (-32602, expected)
        # Nothing stored, and the one task there is stays readable.
        listed = await rpc(client, base, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        assert listed["result"].get("configs", []) == []
        tasks = await rpc(client, base, "ListTasks", {})
        assert [t["id"] for t in tasks["result"]["tasks"]] == [task_id]


async def test_a_stored_config_that_cannot_be_sent_fails_with_its_reason(tmp_path: Path) -> None:
    """A config stored before today's checks (edited into the table here) whose token
    cannot go in a header: its deliveries fail, and the config says why; before, each
    delivery died unseen and the config stayed ``active``."""
    db = tmp_path / "tasks.db"
    GATES[401] = asyncio.Event()
    async with (
        receiver() as rec,
        push_agent(task_store=f"sqlite:///{db}") as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        reply = await rpc(
            client,
            base,
            "SendMessage",
            {
                "message": skill_message("demo.gate", 401),
                "configuration": {
                    "returnImmediately": True,
                    "taskPushNotificationConfig": {
                        "id": "old",
                        "url": rec.url("/old"),
                        "token": "fine",
                    },
                },
            },
        )
        task_id = reply["result"]["task"]["id"]
        await asyncio.to_thread(_give_token, db, "old", "caf\u00e9")  # the agent runs on
        GATES[401].set()
        for _ in range(200):
            await app.state.a2a.extras["push"].sender.idle()
            status, reason = (await statuses(client, base, task_id))["old"]
            if status == "failed":
                break
            await asyncio.sleep(0.05)
        got = await rpc(
            client, base, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "old"}
        )
    assert got["result"]["token"] == "café"
    assert status == "failed", reason
    assert "cannot be sent" in str(reason)


def _give_token(db: Path, config_id: str, token: str) -> None:
    """Write *token* into a stored config (its JSON, unencrypted), as an older version's
    checks let it be stored."""
    with sqlite3.connect(db, timeout=30) as conn:
        (data,) = conn.execute(
            "SELECT config_data FROM push_notification_configs WHERE config_id = ?", (config_id,)
        ).fetchone()
        document = json.loads(bytes(data))
        document["token"] = token
        conn.execute(
            "UPDATE push_notification_configs SET config_data = ? WHERE config_id = ?",
            (json.dumps(document).encode(), config_id),
        )
