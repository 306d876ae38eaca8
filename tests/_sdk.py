"""Official a2a-sdk clients pinned to one binding and protocol version, and their requests."""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client import client_factory as _client_factory
from a2a.compat.v0_3.grpc_transport import CompatGrpcTransport
from a2a.server.agent_execution.active_task import ActiveTask
from a2a.server.agent_execution.active_task_registry import ActiveTaskRegistry
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Message, Part, Role, SendMessageRequest, Task
from google.protobuf.struct_pb2 import Struct

from ._support import TLS

# a2a-sdk 1.3's import cycle can leave ``client_factory.CompatGrpcTransport`` None, and a
# 0.3 gRPC interface then gets the 1.0 transport (see tests/bindings/_peers.py).
if _client_factory.CompatGrpcTransport is None:  # pragma: no cover - import-order dependent
    _client_factory.CompatGrpcTransport = CompatGrpcTransport


async def make_client(
    url: str, binding: str, version: str, *, streaming: bool = False, **options: Any
) -> Any:
    """An SDK client that talks to *url* only over *binding* at protocol *version*
    (*options*: of its ``httpx.AsyncClient``, such as ``headers``)."""
    async with httpx.AsyncClient(verify=TLS) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
    keep = [
        i
        for i in card.supported_interfaces
        if i.protocol_binding == binding and i.protocol_version == version
    ]
    assert keep, f"card does not declare {binding} {version}"
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(keep)
    config = ClientConfig(
        streaming=streaming,
        supported_protocol_bindings=[binding],
        httpx_client=peer_http(**options),
    )
    if binding == "GRPC":
        import grpc

        config.grpc_channel_factory = grpc.aio.insecure_channel
    return ClientFactory(config).create(card)


#: Seconds an SDK client in the tests waits for an answer. The SDK's default (httpx's 5 s)
#: is a wall-clock bound a busy 2-core machine can exceed; this is only a deadline.
PEER_TIMEOUT = 60.0


def peer_http(**kwargs: Any) -> httpx.AsyncClient:
    """The HTTP client an SDK peer uses in the tests (a generous deadline, see above)."""
    kwargs.setdefault("verify", TLS)
    return httpx.AsyncClient(timeout=PEER_TIMEOUT, **kwargs)


def data_part(value: dict[str, Any]) -> Part:
    part = Part()
    struct = Struct()
    struct.update(value)
    part.data.struct_value.CopyFrom(struct)
    return part


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
    """A SendMessage request: an optional data part, then an optional text part."""
    parts: list[Part] = []
    if data is not None:
        parts.append(data_part(data))
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


class StallingStore(InMemoryTaskStore):
    """A memory task store that, once armed, holds the next read an a2a-sdk run's start
    makes (``ActiveTask.start``) until its reader is cancelled: ``stalled`` is set when the
    read is held, ``cancelled`` when the reader was cancelled; ``handed`` when the registry
    read the task to hand a call a run already registered (a subscribe's owner check)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.stalled = asyncio.Event()
        self.cancelled = asyncio.Event()
        #: set when the registry reads the task for a call it hands a run already registered
        self.handed = asyncio.Event()

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        codes = _calling_codes()
        starting = ActiveTask.start.__code__ in codes
        if ActiveTaskRegistry.get_or_create.__code__ in codes and not starting:
            self.handed.set()
        if self.armed and starting:
            self.armed = False
            self.stalled.set()
            try:
                await asyncio.Event().wait()
            finally:
                self.cancelled.set()
        return await super().get(task_id, context)


def _calling_codes() -> list[object]:
    """The code objects of the calls (and awaits) that led here."""
    codes, frame = [], sys._getframe()
    while frame is not None:
        codes.append(frame.f_code)
        frame = frame.f_back
    return codes
