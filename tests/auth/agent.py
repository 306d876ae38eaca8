"""An apcore registry with an ACL (admin-only module) and the SDK-client helpers to call it."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest
from apcore import ACL, ACLRule, Executor, Registry
from google.protobuf.struct_pb2 import Struct
from pydantic import BaseModel

from apcore_a2a import A2AServerFactory
from tests._modules import Add
from tests._support import TLS, free_port, threaded_server

BINDINGS = [("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0"), ("HTTP+JSON", "0.3")]


class Empty(BaseModel):
    pass


class Caller(BaseModel):
    id: str | None = None
    type: str | None = None
    roles: list[str] = []


class Reset:
    input_schema = Empty
    output_schema = Caller
    description = "Reset everything (admins only); reports who asked"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        who = context.identity
        return {"id": who.id, "type": who.type, "roles": list(who.roles)}


class WaitOut(BaseModel):
    waited: bool


class Wait:
    input_schema = Empty
    output_schema = WaitOut
    description = "Wait until canceled (at most 20 s)"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        for _ in range(400):
            if context.cancel_token is not None and context.cancel_token.is_cancelled:
                break
            await asyncio.sleep(0.05)
        return {"waited": True}


def build_executor() -> Executor:
    registry = Registry()
    registry.register("demo.add", Add())
    registry.register("demo.wait", Wait())
    registry.register("admin.reset", Reset())
    acl = ACL(
        rules=[
            ACLRule(
                callers=["@external"],
                targets=["admin.*"],
                effect="allow",
                conditions={"roles": ["admin"]},
            ),
            ACLRule(callers=["@external"], targets=["demo.*"], effect="allow"),
        ],
        default_effect="deny",
    )
    return Executor(registry, acl=acl)


@contextlib.contextmanager
def serve_agent(**settings: Any) -> Iterator[str]:
    port = free_port()
    app, _ = A2AServerFactory(
        build_executor(), environ={}, port=port, name="auth-agent", **settings
    ).create()
    with threaded_server(app, port=port) as url:
        yield url


def message(skill: str, data: dict[str, Any] | None = None, **ids: str) -> SendMessageRequest:
    part = Part()
    struct = Struct()
    struct.update(data or {})
    part.data.struct_value.CopyFrom(struct)
    msg = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[part], **ids)
    msg.metadata.update({"skillId": skill})
    return SendMessageRequest(message=msg)


@contextlib.asynccontextmanager
async def sdk_client(
    url: str, binding: str, version: str, headers: dict[str, str], *, streaming: bool = False
) -> AsyncIterator[Any]:
    """An official SDK client pinned to one binding/version, sending *headers* on every call."""
    async with httpx.AsyncClient(verify=TLS) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
    keep = [
        i
        for i in card.supported_interfaces
        if i.protocol_binding == binding and i.protocol_version == version
    ]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(keep)
    async with httpx.AsyncClient(headers=headers, timeout=30, verify=TLS) as http:
        config = ClientConfig(
            streaming=streaming, supported_protocol_bindings=[binding], httpx_client=http
        )
        client = ClientFactory(config).create(card)
        try:
            yield client
        finally:
            await client.close()


async def send(client: Any, request: SendMessageRequest) -> Any:
    """Blocking send; the final Task (or Message)."""
    result = None
    async for response in client.send_message(request):
        result = response.task if response.HasField("task") else response.message
    return result
