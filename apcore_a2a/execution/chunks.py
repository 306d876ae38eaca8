"""A streaming module's chunks: which one is the last, and its data chunks merged."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

#: How long a streamed chunk waits for the next one to learn whether it was the last: long
#: enough for a generator that returns right after its final yield (apcore's stream
#: pipeline adds a few awaits), short enough that a slow stream barely notices.
LAST_CHUNK_GRACE = 0.02

_END = object()


async def with_last_flag(chunks: AsyncIterator[Any]) -> AsyncGenerator[tuple[Any, bool], None]:
    """Yield ``(chunk, is_last)`` for each chunk of ``chunks``, in order.

    A2A marks an artifact's final chunk ``lastChunk`` and allows no empty closing update,
    but only the generator's end says which chunk was the last: each chunk waits up to
    :data:`LAST_CHUNK_GRACE` for the next; when the generator ends first it goes out as the
    last, else as not (and the task's terminal status closes the artifact). The caller owns
    ``chunks`` (and closes it); a pending read is cancelled here when the consumer stops
    early, so the generator is never closed while it is running."""
    held: Any = _END
    pending: asyncio.Task[Any] | None = None
    try:
        while True:
            pending = asyncio.ensure_future(anext(chunks, _END))
            if held is not _END:
                done, _ = await asyncio.wait({pending}, timeout=LAST_CHUNK_GRACE)
                if not done:
                    yield held, False
                    held = _END
            failure: Exception | None = None
            try:
                following = await pending
            except Exception as exc:
                following, failure = _END, exc
            pending = None
            if held is not _END:
                # A module that fails mid-stream still delivers what it yielded before.
                yield held, following is _END and failure is None
            if following is _END:
                if failure is not None:
                    raise failure
                return
            held = following
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pending


def deep_merge(target: dict[str, Any], chunk: dict[str, Any]) -> None:
    """Merge *chunk* into *target*, dicts key by key (a streamed module's data chunks)."""
    for key, value in chunk.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            deep_merge(target[key], value)
        else:
            target[key] = value
