"""Secrets only the agent reads (issue 31, item 5): SQLite store files are created 0600,
and private keys kept in the database are sealed with the encryption key, or the start
says clearly that they are stored in the clear."""

from __future__ import annotations

import logging
import sqlite3
import stat
from pathlib import Path

import httpx
import pytest
from apcore import Registry

from apcore_a2a import A2AServerFactory

from .._modules import Add
from .._support import TLS, running_server, send_message

KEY_TABLES = ("apcore_a2a_push_signing_keys", "apcore_a2a_card_signing_keys")
FERNET_KEY = "0vnJxhxrd4Y0wHxp1ugJfCC4W_cg-632ASDH3kR-k6c="


async def _serve_once(store: Path, **settings: object) -> None:
    registry = Registry()
    registry.register("demo.add", Add())
    app, _card = A2AServerFactory(
        registry,
        environ={},
        task_store=f"sqlite:///{store}",
        push_notifications=True,
        card_signing=True,
        **settings,
    ).create()
    async with running_server(app) as base, httpx.AsyncClient(base_url=base, verify=TLS) as http:
        send = send_message("demo.add", {"a": 1, "b": 2})
        answer = await http.post("/", json=send, headers={"A2A-Version": "1.0"})
        assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        # Checked while the server holds the database open: the WAL and SHM files exist.
        for name in (store.name, f"{store.name}-wal", f"{store.name}-shm"):
            mode = stat.S_IMODE((store.parent / name).stat().st_mode)
            assert mode == 0o600, f"{name} is {oct(mode)}"


def _stored_keys(store: Path) -> list[str]:
    with sqlite3.connect(store) as db:
        return [
            row[0] for table in KEY_TABLES for row in db.execute(f"SELECT key_data FROM {table}")
        ]


async def test_store_files_are_private_and_clear_keys_are_said_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "tasks.db"
    with caplog.at_level(logging.WARNING, logger="apcore_a2a.keys"):
        await _serve_once(store)
    keys = _stored_keys(store)
    assert len(keys) == 2 and all(k.startswith("-----BEGIN") for k in keys)
    said = [r.getMessage() for r in caplog.records if "in the clear" in r.getMessage()]
    assert len(said) == 2, said
    assert all("A2A_PUSH_ENCRYPTION_KEY" in message for message in said)


async def test_keys_are_sealed_with_the_encryption_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "tasks.db"
    with caplog.at_level(logging.WARNING, logger="apcore_a2a.keys"):
        await _serve_once(store, push_encryption_key=FERNET_KEY)
    keys = _stored_keys(store)
    assert len(keys) == 2 and all(k.startswith("fernet:") for k in keys)
    assert not [r for r in caplog.records if "in the clear" in r.getMessage()]
