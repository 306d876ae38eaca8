"""Requests and sends for the foundation tests (clients: :mod:`tests._sdk`)."""

from __future__ import annotations

import uuid
from typing import Any

from a2a.types import Message, Part, Role, SendMessageRequest

BINDINGS = [("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0"), ("HTTP+JSON", "0.3")]


def message(*parts: Part, skill: str | None = None, **ids: str) -> SendMessageRequest:
    msg = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=list(parts), **ids)
    if skill:
        msg.metadata.update({"skillId": skill})
    return SendMessageRequest(message=msg)


async def send(client: Any, request: SendMessageRequest) -> Any:
    """Blocking send; returns the final Task (or Message)."""
    result = None
    async for response in client.send_message(request):
        result = response.task if response.HasField("task") else response.message
    return result
