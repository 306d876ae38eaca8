"""A stream that survives dropped connections by resubscribing with ``Last-Event-ID``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import httpx

from apcore_a2a.client import _jsonrpc
from apcore_a2a.client._dialects import Dialect
from apcore_a2a.client.errors import A2AConnectionError

__all__ = ["resumable"]

Endpoint = Callable[[], Awaitable[tuple[Dialect, str]]]
#: the first call of a message stream: (method, params) in the agent's dialect
StartCall = Callable[[Dialect], tuple[str, Mapping[str, Any]]]


async def resumable(
    endpoint: Endpoint,
    http: httpx.AsyncClient,
    task_id: str | None,
    last_event_id: str | None,
    max_retries: int,
    start: StartCall | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Events of a subscription to *task_id* (or of the message stream *start* opens),
    resumed by subscription after the last id seen whenever the connection drops: at most
    *max_retries* times in a row (0.25, 0.5, 1 s ... apart), then A2AConnectionError."""
    cursor = [last_event_id]
    failures = 0

    def seen(event_id: str) -> None:
        nonlocal failures
        cursor[0], failures = event_id, 0

    while True:
        dialect, url = await endpoint()
        if start is not None:
            method, params = start(dialect)
        else:
            method, params = dialect.subscribe, {"id": task_id}
        try:
            async for event in _jsonrpc.stream(
                http,
                dialect.version,
                url,
                method,
                params,
                last_event_id=cursor[0] if start is None else None,
                on_id=seen,
            ):
                if task_id is None:
                    task_id = event.get("id") if event["kind"] == "task" else event.get("taskId")
                yield event
            return
        except A2AConnectionError as exc:
            can_resume = cursor[0] is not None and task_id is not None
            if not can_resume or exc.status_code is not None or failures >= max_retries:
                if failures:
                    raise A2AConnectionError(
                        f"stream of task {task_id} lost; gave up after "
                        f"{failures} resume attempt(s): {exc}"
                    ) from exc
                raise
            start = None  # from now on: the task's events after the last id seen
            failures += 1
            await asyncio.sleep(0.25 * 2 ** (failures - 1))
