"""Talking to our server through the official a2a-sdk client."""

from __future__ import annotations

import uuid
from typing import Any

from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, Task

from .._support import ROOT

EXTENSIONS = str(ROOT / "examples" / "extensions")


async def client(base_url: str, *, streaming: bool = False) -> Client:
    return await ClientFactory(ClientConfig(streaming=streaming)).create_from_url(base_url)


def request(
    skill: str | None,
    data: dict[str, Any] | None = None,
    *,
    text: str | None = None,
    task_id: str = "",
    context_id: str = "",
    return_immediately: bool = False,
    message_id: str | None = None,
) -> SendMessageRequest:
    parts: list[Part] = []
    if data is not None:
        part = Part()
        part.data.struct_value.update(data)
        parts.append(part)
    if text is not None:
        parts.append(Part(text=text))
    msg = Message(
        role=Role.ROLE_USER,
        message_id=message_id or uuid.uuid4().hex,
        parts=parts,
        task_id=task_id,
        context_id=context_id,
    )
    if skill:
        msg.metadata.update({"skillId": skill})
    req = SendMessageRequest(message=msg)
    if return_immediately:
        req.configuration.return_immediately = True
    return req


async def send(c: Client, req: SendMessageRequest) -> Task:
    """Unary send; returns the task the server answered with."""
    result: Task | None = None
    async for response in c.send_message(req):
        if response.HasField("task"):
            result = response.task
    assert result is not None, "server answered without a task"
    return result
