"""Stream slots of gRPC calls: A2A's streams (the interceptor, ``grpc.py``) and those of
the services other than A2A (``Health.Watch``, reflection), which need no credentials:
without a slot per stream one client could hold any number open (20,000 ``Watch``
streams cost the agent 400 MB). Each takes a slot of the caller's address from the
:class:`~apcore_a2a.server.limits.StreamLimiter` that counts A2A's gRPC and SSE streams,
and gives it back when it ends or is canceled.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio

from apcore_a2a import errors
from apcore_a2a.execution.identity import caller_key
from apcore_a2a.upstream.error_answers import abort

if TYPE_CHECKING:
    from apcore import Identity

    from apcore_a2a.server.limits import StreamLimiter


def caller_of(identity: Identity | None, context: grpc.aio.ServicerContext) -> str:
    """The quota key (:func:`~apcore_a2a.execution.identity.caller_key`)."""
    peer = str(context.peer() or "unknown")  # e.g. "ipv4:127.0.0.1:53422"
    kind, _, rest = peer.partition(":")
    address = rest.rsplit(":", 1)[0] if kind in ("ipv4", "ipv6") else peer
    return caller_key(identity, address.strip("[]"))


def held_streams(handler: grpc.RpcMethodHandler, streams: StreamLimiter) -> grpc.RpcMethodHandler:
    """*handler* whose server streams, if it has any, each hold a slot of *streams*."""
    if handler.unary_stream is not None:
        behavior, wrap = handler.unary_stream, grpc.unary_stream_rpc_method_handler
    elif handler.stream_stream is not None:
        behavior, wrap = handler.stream_stream, grpc.stream_stream_rpc_method_handler
    else:
        return handler
    # grpc.aio streams an async generator's items, or awaits a coroutine that writes with
    # context.write (Health.Watch does): the wrapper must be of the same kind.
    if inspect.isasyncgenfunction(behavior):

        async def generated(request: Any, context: grpc.aio.ServicerContext) -> Any:
            async with stream_slot(streams, caller_of(None, context), context):
                async for item in behavior(request, context):
                    yield item

        held: Callable[[Any, grpc.aio.ServicerContext], Any] = generated
    else:

        async def written(request: Any, context: grpc.aio.ServicerContext) -> Any:
            async with stream_slot(streams, caller_of(None, context), context):
                return await behavior(request, context)

        held = written
    return wrap(
        held,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


@contextlib.asynccontextmanager
async def stream_slot(
    streams: StreamLimiter, caller: str, context: grpc.aio.ServicerContext, *, a2a: bool = False
) -> AsyncIterator[None]:
    """Hold a stream slot of *caller* while the call runs (the same limits as SSE streams);
    a refusal ends the call: UNAVAILABLE for the agent's cap (HTTP's 503), for the caller's
    RESOURCE_EXHAUSTED, or on an *a2a* service the error raised, answered by its servicer."""
    refused = await streams.acquire(caller)
    if refused is not None:
        own = isinstance(refused.error, errors.OwnError)
        if own and a2a:
            raise refused.error
        code = grpc.StatusCode.RESOURCE_EXHAUSTED if own else grpc.StatusCode.UNAVAILABLE
        await abort(context, code, refused.error.message, None, refused.retry_after)
    try:
        yield
    finally:
        await streams.release(caller)
