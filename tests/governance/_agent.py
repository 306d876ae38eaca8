"""An apcore client with its system modules on (``sys_modules`` and events), served by a
real uvicorn server on 127.0.0.1, and the wire calls the governance tests make."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from apcore import APCore, Config
from apcore.decorator import module

from apcore_a2a import A2AServerFactory
from tests._support import running_server

V1 = {"A2A-Version": "1.0"}
#: operator and plain user keys (``KEY=ID:ROLE``) for the agents with authentication
OPS = {"X-API-Key": "ops-key-0123456789abcdef"}
USER = {"X-API-Key": "user-key-0123456789abcdef"}
KEYS = ("ops-key-0123456789abcdef=ops:operator", "user-key-0123456789abcdef=ann")
TOGGLE = "system.control.toggle_feature"


def apcore_client() -> APCore:
    """``APCore`` with sys_modules and events on: 9 system modules beside ``demo.echo``."""
    config = Config(data={"sys_modules": {"enabled": True, "events": {"enabled": True}}})
    client = APCore(config=config)

    @module(id="demo.echo", description="Echo the text", registry=client.registry)
    def echo(text: str) -> str:
        return text

    return client


@contextlib.asynccontextmanager
async def served(target: Any, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """*target* (registry, executor or client) served on 127.0.0.1; an HTTP client on it."""
    app, _card = A2AServerFactory(target, environ={}, name="governed", **settings).create()
    async with running_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
        yield http


def send(skill: str | None, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A 1.0 JSON-RPC SendMessage of one data part (blocking)."""
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": data}],
        **extra,
    }
    if skill:
        message["metadata"] = {"skillId": skill}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def call(
    http: httpx.AsyncClient, skill: str | None, data: dict[str, Any], **headers: str
) -> dict[str, Any]:
    """The JSON-RPC answer to :func:`send`."""
    answer = await http.post("/", json=send(skill, data), headers={**V1, **headers})
    body: dict[str, Any] = answer.json()
    return body


async def skills(http: httpx.AsyncClient) -> list[str]:
    """The skill ids of the public card."""
    card = (await http.get("/.well-known/agent-card.json", headers=V1)).json()
    return [skill["id"] for skill in card["skills"]]


def toggle(enabled: bool) -> dict[str, Any]:
    return {"module_id": "demo.echo", "enabled": enabled, "reason": "test"}
