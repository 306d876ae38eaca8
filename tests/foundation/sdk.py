"""Building official a2a-sdk clients pinned to one binding and protocol version."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest
from google.protobuf.struct_pb2 import Struct

BINDINGS = [("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0"), ("HTTP+JSON", "0.3")]


async def make_client(url: str, binding: str, version: str, *, streaming: bool = False) -> Any:
    """An SDK client that talks to *url* only over *binding* at protocol *version*."""
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, url).get_agent_card()
    keep = [
        i
        for i in card.supported_interfaces
        if i.protocol_binding == binding and i.protocol_version == version
    ]
    assert keep, f"card does not declare {binding} {version}"
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(keep)
    config = ClientConfig(streaming=streaming, supported_protocol_bindings=[binding])
    return ClientFactory(config).create(card)


def message(*parts: Part, skill: str | None = None, **ids: str) -> SendMessageRequest:
    msg = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=list(parts), **ids)
    if skill:
        msg.metadata.update({"skillId": skill})
    return SendMessageRequest(message=msg)


def data_part(value: dict[str, Any]) -> Part:
    part = Part()
    struct = Struct()
    struct.update(value)
    part.data.struct_value.CopyFrom(struct)
    return part


async def send(client: Any, request: SendMessageRequest) -> Any:
    """Blocking send; returns the final Task (or Message)."""
    result = None
    async for response in client.send_message(request):
        result = response.task if response.HasField("task") else response.message
    return result
