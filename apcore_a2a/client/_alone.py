"""A client error leaves alone: nothing behind it keeps what the agent answered.

An exception keeps alive whatever is behind it: the exceptions it was raised from or
while handling (``__cause__``, ``__context__``), and through its traceback every frame it
left with the values they held. Both hold the agent's answer when a call fails: the SDK's
error (kept by ``contextlib``'s ``__exit__`` frame even when nothing is chained) and the
protobuf or pydantic error behind it, the body the client read (up to
``MAX_ANSWER_BYTES``). Measured, an error raised for a 10 MiB answer kept 40 MiB alive for
as long as a caller held it (a list of failures, a log record). Its own message is bounded
(``errors.MAX_MESSAGE_CHARS``); the rest is dropped where the error leaves the client: a
public method (:func:`leaves_alone`) or a stream's iterator (:func:`alone_after_events`).
"""

from __future__ import annotations

import contextlib
import functools
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, ParamSpec, TypeVar

from apcore_a2a.client.errors import A2AClientError

P = ParamSpec("P")
R = TypeVar("R")


@contextlib.contextmanager
def alone() -> Iterator[None]:
    """Let a typed error raised inside leave with nothing chained to it and the frames it
    left (all finished: only their values go) holding nothing; its traceback still says
    where it was raised."""
    try:
        yield
    except A2AClientError as error:
        error.__cause__ = error.__context__ = None
        # The frames below this one are done (the error left them): clearing drops their
        # values only. The running ones, this and its callers', are skipped by clear_frames.
        traceback.clear_frames(error.__traceback__)
        raise


def leaves_alone(method: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """*method* (a coroutine function) in :func:`alone`, its own frame included: what it
    read of the answer before refusing it (a task of no id, a push status that is none)."""

    @functools.wraps(method)
    async def alone_after(*args: P.args, **kwargs: P.kwargs) -> R:
        with alone():
            return await method(*args, **kwargs)

    return alone_after


async def alone_after_events(events: AsyncIterator[R]) -> AsyncIterator[R]:
    """*events* (a stream's iterator, closed with this one) in :func:`alone`, the frames
    of the iterator that read them included (the event it refused)."""
    with alone():
        async with contextlib.aclosing(events):  # type: ignore[type-var]
            async for event in events:
                yield event
