"""A cancel stored while the task's module still runs: the run's later events are dropped.

Two cluster replicas in this loop on one SQLite file. A runs ``life.late`` (it waits for
A's gate, then streams two chunks); B cancels the task, which writes ``canceled`` to the
store. A's cancel watcher polls once an hour here, so A's module runs on: the test opens
the gate, and both chunks reach A's SDK after the stored cancel. They must not be stored,
streamed or logged as an agent error (the second one appends to an artifact the canceled
task never got: a2a-sdk 1.3 logged ``InvalidAgentResponseError`` at ERROR).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.types import CancelTaskRequest, GetTaskRequest, TaskState

from apcore_a2a import A2AServerFactory
from tests._sdk import request

from .._support import running_server
from ._client import sdk_client, summarize
from ._modules import Probe, build_executor

CANCELED = TaskState.TASK_STATE_CANCELED


@contextlib.asynccontextmanager
async def _replica(store: str) -> AsyncIterator[tuple[str, Probe]]:
    """A cluster replica on *store* (URL, probe) whose cancel watcher polls once an hour.

    Not ``agent_server``: its leak check of the loop would see the other replica, and a
    freed SQL quota slot's trim outlives the server (``storage/quota_slots.py``, reported)."""
    probe = Probe(gate=asyncio.Event())
    app, _card = A2AServerFactory(
        build_executor(probe),
        environ={},
        name="lifecycle",
        task_store=store,
        cluster=True,
        cluster_poll_interval=3600.0,
    ).create()
    async with running_server(app) as url:
        yield url, probe


# life.late: chunks after the cancel; life.gate: a result and ``completed`` after it.
@pytest.mark.parametrize("skill", ["life.late", "life.gate"])
async def test_events_after_a_cancel_stored_elsewhere_are_dropped(
    caplog: pytest.LogCaptureFixture, tmp_path: Path, skill: str
) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    async with _replica(store) as (a, probe), _replica(store) as (b, _):
        streamer = await sdk_client(a)
        canceller = await sdk_client(b, streaming=False)
        try:
            events = []
            async for event in streamer.send_message(request(skill, {})):
                events.append(event)
                if len(events) == 2:  # task, working: the module waits for the gate
                    task_id = events[0].task.id
                    canceled = await canceller.cancel_task(CancelTaskRequest(id=task_id))
                    assert canceled.status.state == CANCELED
                    assert probe.gate is not None
                    probe.gate.set()  # the module's output comes now, after the stored cancel
            # A's stream ends at the stored cancel, without the module's output.
            assert [summarize(e) for e in events] == [
                ("task", "SUBMITTED"),
                ("status", "WORKING"),
                ("task", "CANCELED"),
            ]
            for client in (streamer, canceller):
                stored = await client.get_task(GetTaskRequest(id=task_id))
                assert stored.status.state == CANCELED
                assert list(stored.artifacts) == []
        finally:
            await streamer.close()
            await canceller.close()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
