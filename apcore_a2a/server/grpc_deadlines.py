"""How long a gRPC client may take to say what it wants: HTTP's slow-client bounds on the
gRPC port.

grpcio bounds neither by itself the way the agent needs. A connection that sends nothing
is closed only after grpc's handshake timeout (about a minute, measured), and a call
whose HEADERS arrived but whose request message never completes (no END_STREAM) is held
for ever: it has no deadline unless its own client sent one, and an open call keeps its
connection from ever being idle. Each such call holds its stream, a handler task and
about 24 KB (2,000 on one connection: 48 MB) for as long as the client likes.

- ``header_timeout`` bounds the connection's handshake (grpc's
  ``grpc.server_handshake_timeout_ms``: TLS, and the HTTP/2 preface with its SETTINGS);
- ``body_timeout`` bounds the request message: counted from the call's HEADERS, the
  whole length-prefixed message must be in, else the call ends ``DEADLINE_EXCEEDED`` and
  its stream is reset (HTTP answers 408).

A unary request cannot be timed where grpc.aio reads it (before any handler of ours
runs), so :func:`timed` serves the method as request-streaming, which hands the handler
the call at its HEADERS, and reads the one request itself. The wire is the same:
HTTP/2 does not tell a unary request from a stream of one.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio

from apcore_a2a.upstream.error_answers import abort

if TYPE_CHECKING:
    from apcore_a2a.settings import Settings

#: what a call without a request message is told
NO_REQUEST_TEXT = "the call carried no request message"


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def connection_options(settings: Settings) -> list[tuple[str, int]]:
    """The grpc server options bounding a connection's handshake and its idle time."""
    options = [
        # grpc keeps a connection without calls open forever (uvicorn closes an idle
        # keep-alive after 5 s): clients gone quiet would hold a descriptor each. GOAWAY
        # after this long; a client's channel reconnects on its next call. Open streams
        # are calls, so a long subscription is never idle.
        ("grpc.max_connection_idle_ms", _ms(settings.grpc_max_connection_idle)),
    ]
    if settings.header_timeout:
        # From accept to the client's SETTINGS (after TLS): a socket sending nothing, or
        # half a preface, is closed then.
        options.append(("grpc.server_handshake_timeout_ms", _ms(settings.header_timeout)))
    return options


def timed(handler: grpc.RpcMethodHandler, seconds: float | None) -> grpc.RpcMethodHandler:
    """*handler* (grpc.aio's, its behaviour ``async``) with its request message bounded to
    *seconds* after the call began; a request-streaming handler, or no bound, is
    returned as it is."""
    if not seconds or handler.request_streaming:
        return handler
    behavior = handler.unary_stream or handler.unary_unary

    async def request_of(context: grpc.aio.ServicerContext) -> Any:
        try:
            request = await asyncio.wait_for(context.read(), seconds)
        except TimeoutError:
            message = f"the request message did not arrive within {seconds:g} s"
            await abort(context, grpc.StatusCode.DEADLINE_EXCEEDED, message)
        if request is grpc.aio.EOF:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, NO_REQUEST_TEXT)
        return request

    # grpc.aio streams an async generator's items, or awaits a coroutine (which may write
    # with context.write, as Health.Watch does): the wrapper must be of the same kind.
    if inspect.isasyncgenfunction(behavior):

        async def generated(
            _requests: Any, context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            request = await request_of(context)
            async for item in behavior(request, context):
                yield item

        return grpc.stream_stream_rpc_method_handler(
            generated,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    async def called(_requests: Any, context: grpc.aio.ServicerContext) -> Any:
        return await behavior(await request_of(context), context)

    wrap = (
        grpc.stream_stream_rpc_method_handler
        if handler.response_streaming
        else grpc.stream_unary_rpc_method_handler
    )
    return wrap(
        called,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
