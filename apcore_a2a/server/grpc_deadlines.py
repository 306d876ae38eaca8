"""How long a gRPC client may take to say what it wants: HTTP's slow-client bounds on the
gRPC port.

grpcio bounds neither by itself the way the agent needs. A connection that sends nothing
is closed only after grpc's handshake timeout (about a minute, measured), and a call
whose HEADERS arrived but whose request message never completes (no END_STREAM) is held
for ever: it has no deadline unless its own client sent one, and an open call keeps its
connection from ever being idle. Each such call holds its stream, a handler task and
about 24 KB (2,000 on one connection: 48 MB) for as long as the client likes.

- ``header_timeout`` bounds the connection's handshake (grpc's
  ``grpc.server_handshake_timeout_ms``: TLS, and the HTTP/2 preface with its SETTINGS),
  then its wait for a call: as HTTP closes a connection that sends no request head
  within it of its opening or of its previous answer, grpc's
  ``grpc.max_connection_idle_ms`` sends GOAWAY to a connection that has had no call that
  long, and closes it (without, grpc kept one that sent its SETTINGS and nothing else
  open for ever, and a client could hold thousands);
- ``body_timeout`` bounds the request message: counted from the call's HEADERS, the
  whole length-prefixed message must be in, else the call ends ``DEADLINE_EXCEEDED`` and
  its stream is reset (HTTP answers 408).

One connection may still open calls far faster than ``body_timeout`` ends them (20,000
stalled calls at 1,000/s took 512 MiB), so :class:`RequestBounds` also counts, per
connection, the calls still waiting for their message: past
``grpc_max_pending_requests`` a new call is refused ``RESOURCE_EXHAUSTED`` at once. A good
client's calls carry their message with their HEADERS and wait for nothing, so even a
burst of concurrent calls on one channel stays far below the bound (HTTP/2's
``MAX_CONCURRENT_STREAMS`` would refuse those too).

A client that vanished without FIN or RST (a dropped NAT entry) would hold its calls,
and their stream slots, until grpc's own keepalive noticed, two hours later: the server
pings a connection after ``grpc_keepalive_time`` of quiet and ends it, with its calls, if
no answer comes within ``grpc_keepalive_timeout``.

A unary request cannot be timed where grpc.aio reads it (before any handler of ours
runs), so :func:`timed` serves the method as request-streaming, which hands the handler
the call at its HEADERS, and reads the one request itself. The wire is the same:
HTTP/2 does not tell a unary request from a stream of one.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio

from apcore_a2a.upstream.error_answers import abort

if TYPE_CHECKING:
    from apcore_a2a.settings import Settings

#: what a call without a request message is told
NO_REQUEST_TEXT = "the call carried no request message"
#: how often a client may ping (ms) without being told GOAWAY too_many_pings
CLIENT_PING_INTERVAL_MS = 1000


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def connection_options(settings: Settings) -> list[tuple[str, int]]:
    """The grpc server options bounding a connection's handshake, its idle time and how
    long a silent peer keeps it (keepalive)."""
    options: list[tuple[str, int]] = []
    if settings.grpc_keepalive_time:
        options += [
            ("grpc.keepalive_time_ms", _ms(settings.grpc_keepalive_time)),
            ("grpc.keepalive_timeout_ms", _ms(settings.grpc_keepalive_timeout)),
            # grpcio 1.85 ends a connection over an unanswered PING at this (a minute by
            # default, measured), not at keepalive_timeout_ms alone.
            ("grpc.http2.ping_timeout_ms", _ms(settings.grpc_keepalive_timeout)),
        ]
    options += [
        # Without it grpc's server takes any client ping on a connection without calls
        # within 2 h as abuse.
        ("grpc.keepalive_permit_without_calls", 1),
        # The client's own keepalive pings. grpc's server takes a ping more often than
        # every 5 min as abuse, and past two such pings sends GOAWAY too_many_pings,
        # which fails the client's calls. grpcio and the SDK's clients send none by
        # default, but a client configured to ping (every 10 s, as many guides suggest)
        # is a good client; one PING a second is still nothing to serve.
        ("grpc.http2.min_ping_interval_without_data_ms", CLIENT_PING_INTERVAL_MS),
    ]
    if settings.header_timeout:
        options += [
            # From accept to the client's SETTINGS (after TLS): a socket sending nothing,
            # or half a preface, is closed then.
            ("grpc.server_handshake_timeout_ms", _ms(settings.header_timeout)),
            # Then, without calls (from the handshake, or the end of its last call), the
            # connection gets GOAWAY and is closed: HTTP's idle keep-alive. A client's
            # channel goes IDLE and reconnects on its next call; an open stream is a
            # call, so a long subscription keeps its connection.
            ("grpc.max_connection_idle_ms", _ms(settings.header_timeout)),
        ]
    return options


class PendingRequests:
    """Per connection (grpc's peer string: address and port), the calls still waiting for
    their request message, at most *cap* each (0: no bound). A connection's entry goes
    when its last waiting call is done, so distinct peers leave nothing behind."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._waiting: dict[str, int] = {}

    def enter(self, peer: str) -> bool:
        """Count one more call of *peer* waiting; False (nothing counted) past the cap."""
        waiting = self._waiting.get(peer, 0)
        if self.cap and waiting >= self.cap:
            return False
        self._waiting[peer] = waiting + 1
        return True

    def leave(self, peer: str) -> None:
        """One call of *peer* entered with :meth:`enter` stops waiting."""
        waiting = self._waiting[peer] - 1
        if waiting:
            self._waiting[peer] = waiting
        else:
            del self._waiting[peer]


class RequestBounds:
    """How long a call's request message may take (*seconds*, None or 0: no bound) and
    how many calls of one connection may wait for theirs (*pending*, 0: no bound)."""

    def __init__(self, seconds: float | None, pending: int) -> None:
        self.seconds = seconds or None
        self.pending = PendingRequests(pending)

    def timed(self, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        """*handler* (grpc.aio's) with its request message bounded; see :func:`timed`."""
        return timed(handler, self.seconds, self.pending)


def timed(
    handler: grpc.RpcMethodHandler,
    seconds: float | None,
    pending: PendingRequests | None = None,
) -> grpc.RpcMethodHandler:
    """*handler* (grpc.aio's, its behaviour a coroutine: streams write their items, see
    :func:`~apcore_a2a.server.grpc_streams.written`) with its request message bounded to
    *seconds* after the call began, and counted in *pending* while it is awaited; a
    request-streaming handler, or no bound at all, is returned as it is."""
    capped = pending is not None and pending.cap > 0
    if handler.request_streaming or not (seconds or capped):
        return handler
    behavior = handler.unary_stream or handler.unary_unary

    async def request_of(context: grpc.aio.ServicerContext) -> Any:
        if pending is None:
            return await read_request(context)
        peer = str(context.peer())
        if not pending.enter(peer):
            message = (
                f"this connection already has {pending.cap} calls waiting for their request message"
            )
            await abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, message)
        try:
            return await read_request(context)
        finally:  # the message came, or the call ended: timeout, cancel, abort
            pending.leave(peer)

    async def read_request(context: grpc.aio.ServicerContext) -> Any:
        try:
            request = await asyncio.wait_for(context.read(), seconds)
        except TimeoutError:
            message = f"the request message did not arrive within {seconds:g} s"
            await abort(context, grpc.StatusCode.DEADLINE_EXCEEDED, message)
        if request is grpc.aio.EOF:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, NO_REQUEST_TEXT)
        return request

    # The interceptor hands over coroutines only: a stream writes its own items
    # (grpc_streams.written), so no wrapper of another kind is needed here.
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
