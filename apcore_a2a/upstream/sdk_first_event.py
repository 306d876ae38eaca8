"""A new task's first event reaches its stream before the module's call starts.

Upstream (a2a-sdk 1.3, ``ActiveTask``): an enqueued event reaches a streaming subscriber
through several tasks (the agent queue's dispatcher and its gathered delivery, the
consumer that saves the task, the subscriber queue's dispatcher, the subscriber), each
woken one event-loop turn after the previous one: 8 turns. apcore's pipeline runs about
half a millisecond of CPU before a module's first await, so without those turns the
submitted ``Task`` waited for it: time to first event at 16 streams was 1.3-2x the plain
a2a-sdk server's (docs/benchmarks.md). ``tests/upstream/test_sdk_first_event.py`` counts
the turns: it fails when the SDK delivers in one (delete this then) or needs more.
"""

from __future__ import annotations

import asyncio

#: event-loop turns the submitted Task needs to reach an SSE stream
FIRST_EVENT_TURNS = 10


async def let_first_event_out() -> None:
    """Yield the loop the turns the SDK needs to deliver the event just enqueued."""
    for _ in range(FIRST_EVENT_TURNS):
        await asyncio.sleep(0)
