"""Learn which streamed chunk is the last one without holding every chunk back.

A2A marks the final chunk of an artifact with ``lastChunk``, and the proto requires
every artifact update to carry at least one part, so an empty closing update is not
allowed. The server only learns that a chunk was the last when the module's generator
ends. ``with_last_flag`` keeps each chunk back for at most ``grace`` seconds while it
waits for the next one: when the generator ends inside that window the chunk goes out
with ``last=True``; when the window passes first, the chunk goes out with ``last=False``
and a generator that ends later is closed by the task's terminal status alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from a2a.types import Part

from apcore_a2a.adapters.outputs import text_from_value
from apcore_a2a.adapters.parts import is_file, output_to_parts

__all__ = ["LAST_CHUNK_GRACE", "StreamSummary", "with_last_flag"]

# Long enough for a generator that returns right after its final yield (apcore's
# stream pipeline adds a few awaits), short enough that a slow stream barely notices.
LAST_CHUNK_GRACE = 0.02

_END = object()


async def with_last_flag(
    chunks: AsyncIterator[Any], grace: float = LAST_CHUNK_GRACE
) -> AsyncGenerator[tuple[Any, bool], None]:
    """Yield ``(chunk, is_last)`` for each chunk of ``chunks``, in order.

    The caller owns ``chunks`` (and closes it); a pending read is cancelled here when
    the consumer stops early, so the generator is never closed while it is running.
    """
    held: Any = _END
    pending: asyncio.Task[Any] | None = None
    try:
        while True:
            pending = asyncio.ensure_future(anext(chunks, _END))
            if held is not _END:
                done, _ = await asyncio.wait({pending}, timeout=grace)
                if not done:
                    yield held, False
                    held = _END
            try:
                following = await pending
            except Exception:
                # A module that fails mid-stream still delivers what it yielded before.
                pending = None
                if held is not _END:
                    yield held, False
                raise
            pending = None
            if following is _END:
                if held is not _END:
                    yield held, True
                return
            if held is not _END:
                yield held, False
            held = following
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pending


def _deep_merge(target: dict[str, Any], chunk: dict[str, Any]) -> None:
    for key, value in chunk.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _deep_merge(target[key], value)
        else:
            target[key] = value


class StreamSummary:
    """The result of a whole stream, for the ``completed`` status message.

    Data chunks are deep-merged into one data part. Text and files are not repeated: the
    artifact holds every chunk, and a long output is stored and sent once.
    """

    def __init__(self) -> None:
        self.count = 0
        self._data: dict[str, Any] = {}

    def add(self, chunk: Any) -> None:
        self.count += 1
        if isinstance(chunk, dict) and not is_file(chunk) and text_from_value(chunk) is None:
            _deep_merge(self._data, {k: v for k, v in chunk.items() if not is_file(v)})

    def parts(self) -> list[Part]:
        return output_to_parts(self._data) if self._data else []
