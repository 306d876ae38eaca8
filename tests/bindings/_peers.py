"""Official a2a-sdk clients pinned to one binding and one protocol version.

The SDK picks the transport from the card (``supported_protocol_bindings`` + the
interface's ``protocol_version``), so each peer gets the served card cut down to the one
interface it must use. gRPC transports need ``grpc_channel_factory``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
import httpx
from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client import client_factory as _client_factory
from a2a.client.transports.grpc import GrpcTransport
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.rest import RestTransport
from a2a.compat.v0_3.grpc_transport import CompatGrpcTransport
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.compat.v0_3.rest_transport import CompatRestTransport
from a2a.types import AgentCard, Message, Part, Role, SendMessageRequest
from google.protobuf.struct_pb2 import Struct

from tests._support import TLS

from .._sdk import peer_http

# a2a-sdk 1.3 has an import cycle (server routes -> compat extension_headers -> a2a.client
# -> client_factory -> compat grpc_transport -> extension_headers): when server code is
# imported before the client, ``client_factory.CompatGrpcTransport`` silently becomes None
# and a 0.3 gRPC interface gets the 1.0 transport. Restore it so "0.3 over gRPC" really is.
if _client_factory.CompatGrpcTransport is None:  # pragma: no cover - import-order dependent
    _client_factory.CompatGrpcTransport = CompatGrpcTransport

#: (binding, protocol version) of every transport the scenario suite runs over.
TRANSPORTS: list[tuple[str, str]] = [
    ("JSONRPC", "1.0"),
    ("HTTP+JSON", "1.0"),
    ("GRPC", "1.0"),
    ("JSONRPC", "0.3"),
    ("HTTP+JSON", "0.3"),
    ("GRPC", "0.3"),
]

#: The SDK transport class each (binding, version) must end up with.
EXPECTED_TRANSPORT: dict[tuple[str, str], type] = {
    ("JSONRPC", "1.0"): JsonRpcTransport,
    ("HTTP+JSON", "1.0"): RestTransport,
    ("GRPC", "1.0"): GrpcTransport,
    ("JSONRPC", "0.3"): CompatJsonRpcTransport,
    ("HTTP+JSON", "0.3"): CompatRestTransport,
    ("GRPC", "0.3"): CompatGrpcTransport,
}


def label(binding: str, version: str) -> str:
    return f"{binding} {version}"


async def fetch_card(url: str) -> AgentCard:
    async with httpx.AsyncClient(verify=TLS) as http:
        return await A2ACardResolver(http, url).get_agent_card()


def pinned_card(card: AgentCard, binding: str, version: str) -> AgentCard:
    keep = [
        i
        for i in card.supported_interfaces
        if i.protocol_binding == binding and i.protocol_version == version
    ]
    assert keep, f"card does not declare {binding} {version}"
    pinned = AgentCard()
    pinned.CopyFrom(card)
    del pinned.supported_interfaces[:]
    pinned.supported_interfaces.extend(keep)
    return pinned


def make_client(
    card: AgentCard,
    binding: str,
    version: str,
    *,
    streaming: bool = False,
    channel_factory: Callable[[str], grpc.aio.Channel] | None = None,
) -> Client:
    config = ClientConfig(
        streaming=streaming,
        supported_protocol_bindings=[binding],
        grpc_channel_factory=channel_factory or grpc.aio.insecure_channel,
        httpx_client=peer_http(),
    )
    return ClientFactory(config).create(pinned_card(card, binding, version))


@dataclass
class Peer:
    """One caller: a blocking client and a streaming client over the same transport."""

    binding: str
    version: str
    client: Client
    streaming: Client
    call_context: ClientCallContext | None = None
    #: the address of the interface the peer is pinned to (for raw calls)
    url: str = ""

    @property
    def name(self) -> str:
        return label(self.binding, self.version)


@contextlib.asynccontextmanager
async def open_peer(
    card: AgentCard, binding: str, version: str, *, headers: dict[str, str] | None = None
) -> AsyncIterator[Peer]:
    client = make_client(card, binding, version)
    streaming = make_client(card, binding, version, streaming=True)
    context = ClientCallContext(service_parameters=headers) if headers else None
    url = pinned_card(card, binding, version).supported_interfaces[0].url
    try:
        yield Peer(binding, version, client, streaming, context, url)
    finally:
        await client.close()
        await streaming.close()


def transport_of(client: Client) -> Any:
    return client._transport  # the SDK exposes no public accessor


def text(value: str) -> Part:
    return Part(text=value)


def data(value: dict[str, Any]) -> Part:
    struct = Struct()
    struct.update(value)
    part = Part()
    part.data.struct_value.CopyFrom(struct)
    return part


def message(
    *parts: Part, skill: str | None, return_immediately: bool = False
) -> SendMessageRequest:
    msg = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=list(parts))
    if skill is not None:
        msg.metadata.update({"skillId": skill})
    request = SendMessageRequest(message=msg)
    if return_immediately:
        request.configuration.return_immediately = True
    return request


async def send(peer: Peer, request: SendMessageRequest) -> Any:
    """Blocking send; the final Task (or Message)."""
    result: Any = None
    async for response in peer.client.send_message(request, context=peer.call_context):
        result = response.task if response.HasField("task") else response.message
    return result
