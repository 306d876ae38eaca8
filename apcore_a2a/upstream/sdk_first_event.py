"""A new task's first event reaches its stream before apcore's pipeline runs."""

from __future__ import annotations

import asyncio

#: event-loop turns the submitted Task needs to reach an SSE stream
FIRST_EVENT_TURNS = 10


async def let_first_event_out() -> None:
    """Yield the loop the turns the SDK needs to deliver the event just enqueued."""
    for _ in range(FIRST_EVENT_TURNS):
        await asyncio.sleep(0)
