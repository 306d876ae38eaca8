"""gRPC calls past the A2A admission: stream slots, cancel-on-drop, and requests that do
not decode.

Stream slots: A2A's streams (the interceptor, ``grpc.py``) and those of the services other
than A2A (``Health.Watch``, reflection), which need no credentials: without a slot per
stream one client could hold any number open (20,000 ``Watch`` streams cost the agent
400 MB). Each takes a slot of the caller's address from the
:class:`~apcore_a2a.server.limits.StreamLimiter` that counts A2A's gRPC and SSE streams,
and gives it back inside its call when it ends or is canceled (:func:`written`). With
``cancel_on_disconnect``, an A2A stream is followed as an SSE one (:func:`followed`,
``streams/answers.py``): a stream closed before its items ended (its client canceled the
call, its deadline passed, its connection closed) is a dropped stream.

Requests that do not decode (corrupt bytes, or nested deeper than protobuf decodes: 100
levels, about 33 of a ``Struct``): grpc answers a deserializer's exception ``UNKNOWN``,
naming its class (``google.protobuf.message.DecodeError``). The deserializer of every
method hands over :data:`UNDECODABLE` instead (:func:`lenient`), and the call answers
``INVALID_ARGUMENT``: an A2A call once admitted (the interceptor: HTTP too answers a body
it cannot parse after its 401), a call to another service at once (:func:`other_service`).

A stop (:class:`CallEnds`): once the drain has ended, an A2A stream whose task's end it did
not see (a ``SubscribeToTask`` of a task parked in ``input-required``, one following a task
on another replica) ends as a stream that ran out of items, status ``OK``, as its SSE form
does, by the same rule (``ops/stream_ends.StopEnd``); grpc's own stop would hold it until
its grace ran out, then answer ``UNAVAILABLE`` "Cancelling all calls", and hold the stop of
the whole agent so long.
A reflection stream ends then too, and ``Health.Watch`` streams (``ops/grpc_health.py``,
through :meth:`CallEnds.also`). With ``cancel_on_disconnect`` the end is no client's drop
(``Answer.stopped``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
)
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio

from apcore_a2a import errors
from apcore_a2a.ops.stream_ends import StopEnd
from apcore_a2a.upstream.error_answers import abort

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext

    from apcore_a2a.server.caller_keys import CallerKeys
    from apcore_a2a.server.limits import StreamLimiter
    from apcore_a2a.streams.answers import StreamDrops
    from apcore_a2a.streams.tap import Answer


#: the request of a call whose bytes are not its method's message
UNDECODABLE = object()
#: what a call whose request does not decode is told
UNDECODABLE_TEXT = "the request is not a valid message of its method (corrupt, or nested too deep)"


def lenient(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """*deserializer* handing over :data:`UNDECODABLE` where it would raise."""
    if deserializer is None:
        return None

    def decode(raw: bytes) -> Any:
        try:
            return deserializer(raw)
        except Exception:  # protobuf's DecodeError; nothing of it is answered
            return UNDECODABLE

    return decode


def other_service(
    handler: grpc.RpcMethodHandler,
    streams: StreamLimiter,
    caller_keys: CallerKeys,
    ends: CallEnds | None = None,
) -> grpc.RpcMethodHandler:
    """*handler* of a service other than A2A (grpc.aio's: its methods are ``async``): a
    request that does not decode answers ``INVALID_ARGUMENT``, each server stream holds a
    slot of *streams* (its caller keyed by *caller_keys*), and a reflection stream is
    ended by *ends* at a stop."""
    kinds = (handler.unary_unary, handler.unary_stream, handler.stream_unary, handler.stream_stream)
    behavior = next(kind for kind in kinds if kind is not None)

    async def decoded(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if handler.request_streaming:
            return _decoded_stream(request, context)
        if request is UNDECODABLE:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, UNDECODABLE_TEXT)
        return request

    @contextlib.asynccontextmanager
    async def held(context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
        if not handler.response_streaming:
            yield
            return
        caller = await caller_keys.of_call(None, context)
        async with stream_slot(streams, caller, context):
            yield

    if inspect.isasyncgenfunction(behavior):  # reflection: its stream closed in the call
        behavior = written(behavior, ends)

    async def called(request: Any, context: grpc.aio.ServicerContext) -> Any:
        request = await decoded(request, context)
        async with held(context):
            return await behavior(request, context)

    return same_kind(handler, called)


class CallEnds:
    """The A2A streams a server has open, and their end by a stop (the module docstring)."""

    def __init__(self) -> None:
        self._open: dict[asyncio.Task[Any], StopEnd] = {}
        self._ended: set[asyncio.Task[Any]] = set()
        self._also: list[Callable[[], None]] = []

    def also(self, end: Callable[[], None]) -> None:
        """Call *end* at the stop's end of the streams (``Health.Watch``'s)."""
        self._also.append(end)

    @contextlib.contextmanager
    def held(self) -> Iterator[StopEnd]:
        """Count the calling task's stream open while the block runs."""
        task = asyncio.current_task()
        assert task is not None
        self._open[task] = end = StopEnd()
        try:
            yield end
        finally:
            self._open.pop(task, None)

    def follow(self, answer: Answer) -> None:
        """The stream of the calling task answers *answer* (its task, once known)."""
        task = asyncio.current_task()
        if task in self._open:
            self._open[task].answer = answer

    def end(self, ending: Mapping[str, str]) -> None:
        """End every open stream: those following a task of *ending* once they have
        written the item of its state there (on its way to them), the others now."""
        for task, end in list(self._open.items()):
            if end.ends_now(ending):
                self._ended.add(task)
                task.cancel()
        for also in self._also:
            also()

    def took(self, task: asyncio.Task[Any]) -> bool:
        """Whether *task*'s cancel is this stop's end of its stream (said once)."""
        if task not in self._ended:
            return False
        self._ended.discard(task)
        return True


def written(
    generate: Callable[[Any, grpc.aio.ServicerContext], AsyncGenerator[Any, None]],
    ends: CallEnds | None = None,
) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[None]]:
    """*generate*, a stream's async generator function, as a coroutine that sends its items
    itself (``context.write``) and closes it before the call ends; *ends* may end it.

    Not handed to grpc.aio as a generator: a cancel (the client's, its deadline, its
    connection closing) landing in grpc.aio's own send of an item never reaches the
    generator, which is closed (its stream slot given back, its drop noted) only when
    Python collects it, after the call. Sent here, the cancel lands in this await, and
    every layer below closes in order inside the call."""

    async def write(request: Any, context: grpc.aio.ServicerContext) -> None:
        task, writing = asyncio.current_task(), False
        try:
            with ends.held() if ends is not None else contextlib.nullcontext() as end:
                async with contextlib.aclosing(generate(request, context)) as items:
                    async for item in items:
                        writing = True
                        await context.write(item)
                        writing = False
                        if end is not None and end.sent_one():
                            return  # its task's last event has gone: the stop ends it
        except asyncio.CancelledError:  # ended in a write its client does not take: no
            # status can follow that write (grpc's stop cuts the call, ops/shutdown.py)
            if ends is None or task is None or not ends.took(task) or writing:
                raise
            task.uncancel()  # ended by the stop: the call ends as a stream that ran out

    return write


async def one(answer: Awaitable[Any]) -> AsyncGenerator[Any, None]:
    """A unary call's *answer* as a stream of one item."""
    yield await answer


def same_kind(
    handler: grpc.RpcMethodHandler, behavior: Callable[[Any, grpc.aio.ServicerContext], Any]
) -> grpc.RpcMethodHandler:
    """A handler of *handler*'s kind (requests, answers streamed or not) running *behavior*,
    its requests decoded by :func:`lenient`."""
    wrap = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }[bool(handler.request_streaming), bool(handler.response_streaming)]
    return wrap(
        behavior,
        request_deserializer=lenient(handler.request_deserializer),
        response_serializer=handler.response_serializer,
    )


async def _decoded_stream(
    requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
) -> AsyncIterator[Any]:
    async for request in requests:
        if request is UNDECODABLE:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, UNDECODABLE_TEXT)
        yield request


async def followed(
    items: AsyncGenerator[Any, None],
    answer: Answer,
    drops: StreamDrops,
    call_context: Callable[[], ServerCallContext],
) -> AsyncGenerator[Any, None]:
    """The *items* of an A2A stream, followed by *drops* (``cancel_on_disconnect``) as an
    SSE stream is: a stream closed before its items ended (or raised the handler's error)
    was dropped by its client (a canceled call, a deadline passed, a closed connection),
    and one dropped before its first item hung up on the run. The interceptor sends the
    items itself and closes this stream at once when a send fails or is canceled."""
    task_id: str | None = None
    ended = False
    try:
        async with contextlib.aclosing(items):
            async for item in items:
                task_id = await drops.sent(answer, task_id)
                yield item
        ended = True
    except Exception:  # the handler's error, answered by the servicer: the stream ended
        ended = True
        raise
    finally:
        await drops.closed(task_id, answer, not ended, call_context)


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
