"""``call``'s wait for a task: the progress line on stderr and the ``--timeout`` bound.

Without ``--stream`` or ``--no-wait``, ``call`` waits as long as the task runs (streaming
when the agent can, to show progress); after 2 s it shows ``task ID: STATE, N s`` on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from apcore_a2a.client import A2AClient, A2AClientError


class StillRunning(Exception):
    """``call`` stopped waiting (``--timeout``) while the task runs on."""


class _Progress:
    """The waiting line on stderr: task id, state, elapsed time (after a quiet first 2 s).

    On a terminal it is redrawn in place every second; elsewhere a line is written when
    the state changes and every 30 s.
    """

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.task_id: str | None = None
        self.state = "submitted"
        self._shown: tuple[str, float] | None = None
        self._tty = sys.stderr.isatty()

    def update(self, task_id: str | None = None, state: str | None = None) -> None:
        self.task_id = task_id or self.task_id
        self.state = state or self.state
        elapsed = time.monotonic() - self.started
        if elapsed < 2 or self.task_id is None:
            return
        shown = self._shown
        if shown and not self._tty and shown[0] == self.state and elapsed - shown[1] < 30:
            return
        self._shown = (self.state, elapsed)
        line = f"task {self.task_id}: {self.state}, {elapsed:.0f} s"
        sys.stderr.write(f"\r\x1b[2K{line}" if self._tty else line + "\n")
        sys.stderr.flush()

    def done(self) -> None:
        if self._tty and self._shown is not None:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()


async def wait_for(
    client: A2AClient, message: Any, options: dict[str, Any], args: argparse.Namespace
) -> Any:
    """Send and wait for the answer, streaming when the agent can, to show progress."""
    progress = _Progress()

    async def follow() -> Any:
        card = await client.discover()
        if not (card.get("capabilities") or {}).get("streaming"):
            return await client.send_message(message, **options)
        async for event in client.stream_message(message, **options):
            if event["kind"] == "message" and progress.task_id is None:
                return event
            task_id = event.get("id") if event["kind"] == "task" else event.get("taskId")
            progress.update(task_id, (event.get("status") or {}).get("state"))
        if progress.task_id is None:
            raise A2AClientError("the agent's stream ended without a task")
        return await client.get_task(progress.task_id)

    async def tick() -> None:
        while True:
            await asyncio.sleep(1)
            progress.update()

    ticker = asyncio.create_task(tick())
    try:
        async with asyncio.timeout(args.timeout):
            return await follow()
    except TimeoutError:
        raise StillRunning(_still_running(progress, args)) from None
    finally:
        ticker.cancel()
        progress.done()


def _still_running(progress: _Progress, args: argparse.Namespace) -> str:
    waited = f"after --timeout {args.timeout:g} s"
    if progress.task_id is None:
        return f"no answer from the agent {waited}; a longer --timeout waits longer"
    return (
        f"task {progress.task_id} is still {progress.state} {waited}; it runs on: follow it "
        f"with 'apcore-a2a task get {args.url} {progress.task_id}' (or start long work "
        "with --no-wait)"
    )
