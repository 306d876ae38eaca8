"""One A2A call through a2a-sdk's client transports, as the client makes every call.

:class:`Caller` picks the SDK transport of the interface a call goes to (JSON-RPC, REST,
gRPC; 1.0 or 0.3; one gRPC channel per address), sends the headers the call needs
(``A2A-Version: 1.0`` for a 1.0 call, the caller's credentials as gRPC metadata for the
agent's own host only, ``Last-Event-ID`` when resuming), runs it in its span with the
client's errors, and resumes a dropped stream from the last SSE id seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
from a2a.client.client import ClientCallContext
from a2a.client.transports.base import ClientTransport
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.rest import RestTransport
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.compat.v0_3.rest_transport import CompatRestTransport
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message as Proto

from apcore_a2a.client import _shapes as shape
from apcore_a2a.client._origin import Endpoint, OriginGuard
from apcore_a2a.client._wire import Call, a2a_call, current, translated
from apcore_a2a.client.errors import A2AConnectionError, A2ADiscoveryError

#: The SDK transport method of each A2A method whose name does not derive from it
_SDK_NAMES = {
    "SendStreamingMessage": "send_message_streaming",
    "SubscribeToTask": "subscribe",
}
_HTTP_TRANSPORTS: dict[tuple[str, str], Callable[..., ClientTransport]] = {
    ("JSONRPC", "1.0"): JsonRpcTransport,
    ("JSONRPC", "0.3"): CompatJsonRpcTransport,
    ("HTTP+JSON", "1.0"): RestTransport,
    ("HTTP+JSON", "0.3"): CompatRestTransport,
}
#: The transports answer GetExtendedAgentCard from the card they were given unless that
#: card says there is an extended one; the client always asks the agent.
_ASK_FOR_EXTENDED = pb.AgentCard(capabilities=pb.AgentCapabilities(extended_agent_card=True))


class Caller:
    """Makes the client's A2A calls: *endpoint* says where each one goes."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        guard: OriginGuard,
        base: str,
        timeout: float | None,
        endpoint: Callable[[], Awaitable[Endpoint]],
    ) -> None:
        self._http, self._guard, self._base, self._timeout = http, guard, base, timeout
        self._endpoint = endpoint
        self._channels: dict[tuple[str, bool], Any] = {}

    async def aclose(self) -> None:
        """Close the gRPC channels opened (the HTTP client is the owner's)."""
        for channel in self._channels.values():
            await channel.close()

    def _transport(self, to: Endpoint) -> ClientTransport:
        if to.binding != "GRPC":
            transport = _HTTP_TRANSPORTS[to.binding, to.version]
            return transport(self._http, _ASK_FOR_EXTENDED, to.url, is_shared_httpx=True)
        try:
            import grpc.aio
            from a2a.client.transports.grpc import GrpcTransport
            from a2a.compat.v0_3.grpc_transport import CompatGrpcTransport
        except ImportError:
            raise A2ADiscoveryError(
                "the agent offers gRPC only, which needs the grpc extra: "
                "pip install 'apcore-a2a[grpc]'"
            ) from None
        channel = self._channels.get((to.url, to.secure))
        if channel is None:
            channel = (
                grpc.aio.secure_channel(to.url, grpc.ssl_channel_credentials())
                if to.secure
                else grpc.aio.insecure_channel(to.url)
            )
            self._channels[to.url, to.secure] = channel
        grpc_transport = GrpcTransport if to.version == "1.0" else CompatGrpcTransport
        return grpc_transport(channel, _ASK_FOR_EXTENDED)

    @contextlib.asynccontextmanager
    async def _sdk(
        self, method: str, request: Proto, call: Call
    ) -> AsyncIterator[tuple[Any, Callable[[Mapping[str, Any]], None]]]:
        """The SDK call for *method* (not yet awaited) in its span, and the span's callback."""
        to = await self._endpoint()
        call.binding = to.binding
        headers: dict[str, str] = {}
        if to.binding == "GRPC":  # the caller's headers and credentials, for its host only
            if urlsplit("//" + to.url).hostname == urlsplit(self._base).hostname:
                headers = await self._guard.metadata(self._http.build_request("POST", self._base))
        elif to.version == "1.0":  # the 0.3 and gRPC transports set their A2A-Version
            headers["A2A-Version"] = "1.0"
        if method == "SubscribeToTask" and call.event_id is not None:
            headers["Last-Event-ID"] = call.event_id
        name = _SDK_NAMES.get(method) or re.sub(r"(?<!^)([A-Z])", r"_\1", method).lower()
        timeout = self._timeout if to.binding == "GRPC" else None  # httpx has its own
        with (
            a2a_call(method, to.version, to.url, MessageToDict(request), headers) as seen,
            translated(method, to.url),
        ):
            context = ClientCallContext(service_parameters=headers, timeout=timeout)
            yield getattr(self._transport(to), name)(request, context=context), seen

    async def call(self, method: str, request: Proto) -> tuple[Any, dict[str, Any]]:
        """Run one SDK call; return its result as received (HTTP) and as 1.0 JSON."""
        call = Call()
        async with self._sdk(method, request, call) as (pending, seen):
            with current(call):
                result = await pending
            as_json = MessageToDict(result) if isinstance(result, Proto) else {}
            seen(as_json)
        return call.wire, as_json

    async def _events(
        self, method: str, request: Proto, call: Call
    ) -> AsyncIterator[dict[str, Any]]:
        """The stream's events in the client's shape, up to the final one."""
        async with (
            self._sdk(method, request, call) as (stream, seen),
            contextlib.aclosing(stream),
        ):
            while True:
                with current(call):
                    try:
                        item = await anext(stream)
                    except StopAsyncIteration:
                        return
                as_json = MessageToDict(item)
                seen(as_json)
                event = shape.event(as_json, call.wire)
                if event is not None:
                    yield event
                    if shape.is_final(event):
                        return

    async def resumable(
        self,
        task_id: str | None,
        last_event_id: str | None,
        max_retries: int,
        first: pb.SendMessageRequest | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """Events of *task_id* (or of the stream *first* opens), resubscribed after the last
        SSE id seen when the connection drops (``A2AClient.resubscribe`` says how)."""
        call = Call(event_id=last_event_id)
        failures = 0
        while True:
            method = "SubscribeToTask" if first is None else "SendStreamingMessage"
            request = pb.SubscribeToTaskRequest(id=task_id) if first is None else first
            try:
                async for event in self._events(method, request, call):
                    failures = 0
                    if task_id is None:
                        task_id = event["id"] if event["kind"] == "task" else event["taskId"]
                    yield event
                return
            except A2AConnectionError as exc:
                can_resume = call.event_id is not None and task_id is not None
                if not can_resume or exc.status_code is not None or failures >= max_retries:
                    if failures:
                        raise A2AConnectionError(
                            f"stream of task {task_id} lost; gave up after "
                            f"{failures} resume attempt(s): {exc}"
                        ) from exc
                    raise
                first = None  # from now on: the task's events after the last id seen
                failures += 1
                await asyncio.sleep(0.25 * 2 ** (failures - 1))
