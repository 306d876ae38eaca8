"""Unexpected server exceptions never reach JSON-RPC clients with their text."""

from __future__ import annotations

from typing import Any

import httpx
from a2a.server.tasks import InMemoryTaskStore

from tests._support import TLS
from tests.foundation.conftest import serve_in_thread
from tests.foundation.modules import build_registry


class BrokenStore(InMemoryTaskStore):
    async def get(self, task_id: str, context: Any = None) -> Any:
        raise RuntimeError("password=hunter2 in /srv/app/db.py")


def test_store_failure_is_a_generic_internal_error() -> None:
    with serve_in_thread(build_registry(), task_store=BrokenStore()) as url:
        body = {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "t"}}
        response = httpx.post(
            url + "/", json=body, headers={"A2A-Version": "1.0"}, timeout=10, verify=TLS
        )
        assert response.status_code == 200
        payload = response.json()
        assert payload == {
            "jsonrpc": "2.0",
            "id": 7,
            "error": {"code": -32603, "message": "Internal error"},
        }
        assert int(response.headers["content-length"]) == len(response.content)
        legacy = {"jsonrpc": "2.0", "id": 8, "method": "tasks/get", "params": {"id": "t"}}
        text = httpx.post(url + "/", json=legacy, timeout=10, verify=TLS).text
        assert "hunter2" not in text and "/srv/" not in text
