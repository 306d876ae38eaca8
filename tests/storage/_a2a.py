"""Talking to our server through the official a2a-sdk client."""

from __future__ import annotations

from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import SendMessageRequest, Task

from .._sdk import peer_http
from .._support import ROOT

EXTENSIONS = str(ROOT / "examples" / "extensions")


async def client(base_url: str, *, streaming: bool = False) -> Client:
    config = ClientConfig(streaming=streaming, httpx_client=peer_http())
    return await ClientFactory(config).create_from_url(base_url)


async def send(c: Client, req: SendMessageRequest) -> Task:
    """Unary send; returns the task the server answered with."""
    result: Task | None = None
    async for response in c.send_message(req):
        if response.HasField("task"):
            result = response.task
    assert result is not None, "server answered without a task"
    return result
