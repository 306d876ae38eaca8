"""A reader that stops reading costs a bounded amount of memory.

a2a-sdk 1.3 queues up to 1,024 events per stream (``ActiveTask.subscribe``), each with a
copy of the whole task: a client that stops reading makes the server hold up to 1,024
copies of the growing task (2,000 chunks of 5 kB: 6.4 GB). :func:`bounded` reads the SDK's
stream as it comes and keeps only the events, up to ``max_stream_backlog_bytes``. A reader
further behind is let go (the task runs on): after the events it had it gets ``-32091``
naming the bound, and resubscribes (``Last-Event-ID`` resumes where it stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, Callable
from typing import TypeVar

from apcore_a2a.errors import QuotaExceededError

T = TypeVar("T")


async def bounded(
    items: AsyncGenerator[T, None], limit: int, size: Callable[[T], int]
) -> AsyncGenerator[T, None]:
    """*items* read as they come, holding at most *limit* ``size`` for the reader (one
    item larger than that alone passes); see the module docstring."""
    waiting: deque[tuple[T, int]] = deque()
    held = 0
    ended: Exception | None = None
    done = False
    ready = asyncio.Event()

    async def pump() -> None:
        nonlocal held, ended, done
        try:
            async for item in items:
                cost = size(item)
                if waiting and held + cost > limit:
                    waiting.clear()
                    ended = QuotaExceededError(
                        message=f"Stream closed: the client fell more than {limit} bytes of "
                        "events behind (max_stream_backlog_bytes); resubscribe to the task "
                        "to go on"
                    )
                    return
                waiting.append((item, cost))
                held += cost
                ready.set()
        except Exception as exc:
            ended = exc
        finally:
            done = True
            ready.set()
            await items.aclose()

    task = asyncio.create_task(pump())
    try:
        while True:
            if waiting:
                item, cost = waiting.popleft()
                held -= cost
                yield item
            elif done:
                if ended is not None:
                    raise ended
                return
            else:
                ready.clear()
                await ready.wait()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
