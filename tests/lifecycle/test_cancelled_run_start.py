"""A follow-up cancelled while its task's run starts leaves the task open to the next call.

After a restart (or on another replica) a task parked in ``input-required`` has no run in
the process; the follow-up that answers it makes a2a-sdk build one, whose start reads the
task. When that request is cancelled during the read (its client hangs up on the stream,
cancels its gRPC call), a2a-sdk 1.3 kept the run registered, never started: the next
follow-up was handed it and waited for ever, and so did a ``CancelTask``
(``upstream/unstarted_runs.py``). Now the next follow-up is answered and a cancel cancels,
on JSON-RPC, REST (streams: a blocking HTTP call is not cancelled by a hang-up) and gRPC.
Without an event log (``task_event_log_size`` 0) a ``SubscribeToTask`` is served by that
run too: after a follow-up's and a subscribe's start were cancelled, and a subscriber was
handed the run a cancelled follow-up was starting, that subscriber gets the task and the
next follow-up's events (it waited for ever: ``upstream/unstarted_runs.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from a2a.types import CancelTaskRequest, SubscribeToTaskRequest, Task, TaskState

from apcore_a2a import A2AServerFactory
from apcore_a2a.storage import observed
from tests._sdk import StallingStore, make_client, request
from tests._support import free_port, running_server
from tests.bindings._outputs_agent import build_executor, send, text_request

#: a hang guard: each answer comes in moments
GUARD = 60


@contextlib.asynccontextmanager
async def _serving(store: StallingStore, **settings: Any) -> AsyncIterator[str]:
    """One process of the agent on *store* (a new one has no run of a parked task)."""
    port = free_port()
    factory = A2AServerFactory(
        build_executor(),
        environ={},
        port=port,
        grpc_port=free_port(),
        task_store=store,
        **settings,
    )
    app, _card = factory.create()
    async with running_server(app, port=port) as url:
        yield url


async def _cancelled_as_its_run_starts(
    store: StallingStore,
    url: str,
    binding: str,
    task_id: str,
    meanwhile: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """A follow-up for *task_id* whose client gives up while its run's start reads the task
    (and *meanwhile* has returned)."""
    client = await make_client(url, binding, "1.0", streaming=binding != "GRPC")
    try:
        store.armed = True
        follow_up = asyncio.ensure_future(send(client, text_request(None, "JFK", task_id=task_id)))
        await asyncio.wait_for(store.stalled.wait(), GUARD)
        if meanwhile is not None:
            await meanwhile()
        follow_up.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follow_up
        await asyncio.wait_for(store.cancelled.wait(), GUARD)  # the server's request ended
        store.stalled.clear()
        store.cancelled.clear()
    finally:
        await client.close()


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_follow_up_cancelled_as_its_run_starts_leaves_the_task_open(
    binding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each read reaches the store, as when a second passes between a request's reads (a
    # slow push config write): else the start reads the task the request read first.
    monkeypatch.setattr(observed, "_READ_TTL", -1.0)
    store = StallingStore()
    async with _serving(store) as url:
        client = await make_client(url, binding, "1.0")
        try:
            answered, canceled = [await send(client, request("out.trip", {})) for _ in "ab"]
        finally:
            await client.close()
    assert answered.status.state == canceled.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

    async with _serving(store) as url:
        for task in (answered, canceled):
            await _cancelled_as_its_run_starts(store, url, binding, task.id)
        client = await make_client(url, binding, "1.0")
        try:
            done: Any = await asyncio.wait_for(
                send(client, text_request(None, "LHR", task_id=answered.id)), GUARD
            )
            stopped = await asyncio.wait_for(
                client.cancel_task(CancelTaskRequest(id=canceled.id)), GUARD
            )
        finally:
            await client.close()
    assert isinstance(done, Task)
    assert done.status.state == TaskState.TASK_STATE_INPUT_REQUIRED  # now asks where from
    assert [p.text for p in done.status.message.parts[:1]] == ["From where?"]
    assert stopped.status.state == TaskState.TASK_STATE_CANCELED


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_subscriber_after_cancelled_run_starts_gets_the_next_answers_events(
    binding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # task_event_log_size 0: no event log, a subscribe is served by the SDK's run of the
    # task (which it builds and starts too, when the process has none).
    monkeypatch.setattr(observed, "_READ_TTL", -1.0)
    store = StallingStore()
    async with _serving(store, task_event_log_size=0) as url:
        client = await make_client(url, binding, "1.0")
        try:
            parked = await send(client, request("out.trip", {}))
        finally:
            await client.close()
    assert parked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

    async with _serving(store, task_event_log_size=0) as url:
        await _cancelled_as_its_run_starts(store, url, binding, parked.id)
        watcher = await make_client(url, binding, "1.0", streaming=True)
        client = await make_client(url, binding, "1.0")
        events = watcher.subscribe(SubscribeToTaskRequest(id=parked.id))
        try:
            # A subscribe whose client gives up while the run it built reads the task.
            store.armed = True
            given_up = asyncio.ensure_future(
                anext(watcher.subscribe(SubscribeToTaskRequest(id=parked.id)))
            )
            await asyncio.wait_for(store.stalled.wait(), GUARD)
            given_up.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await given_up
            await asyncio.wait_for(store.cancelled.wait(), GUARD)
            store.stalled.clear()
            store.cancelled.clear()

            # A subscribe handed the run a follow-up's start reads; that follow-up then
            # cancelled (it hung for ever: no producer comes, no task is read).
            subscribed: asyncio.Future[Any] = asyncio.Future()

            async def subscribe() -> None:
                store.handed.clear()
                subscribed.set_result(asyncio.ensure_future(anext(events)))
                await asyncio.wait_for(store.handed.wait(), GUARD)

            await _cancelled_as_its_run_starts(store, url, binding, parked.id, subscribe)
            first = await asyncio.wait_for(subscribed.result(), GUARD)
            answered = asyncio.ensure_future(
                send(client, text_request(None, "LHR", task_id=parked.id))
            )
            # The stream stays open past input-required (it ends at a terminal state).
            seen = [await asyncio.wait_for(anext(events), GUARD)]
            while seen[-1].status_update.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                seen.append(await asyncio.wait_for(anext(events), GUARD))
            done = await asyncio.wait_for(answered, GUARD)
        finally:
            await events.aclose()  # the subscriber hangs up
            await watcher.close()
            await client.close()
    assert first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    asked = seen[-1].status_update.status.message
    assert [p.text for p in asked.parts[:1]] == ["From where?"]  # asked again, live
    assert done.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
