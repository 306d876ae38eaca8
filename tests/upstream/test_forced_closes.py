"""The SDK behaviour ``apcore_a2a/upstream/forced_closes.py`` answers: closing a request
handler whose runs still run (the tasks a second Ctrl-C abandoned) logs a WARNING per run,
"Dispatcher task is not running". A failure of ``test_the_sdk_...`` means the SDK closes
quietly now: delete the correction, its row and this file."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from a2a.server.agent_execution import AgentExecutor
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest

from apcore_a2a.upstream.forced_closes import quiet_forced_closes
from apcore_a2a.upstream.late_run_events import drop_late_run_events
from tests.client._sdk_agent import agent_card

#: runs left running when the handler closes
RUNS = 3


class _Forever(AgentExecutor):
    """A run that never ends by itself (what a second Ctrl-C abandons)."""

    async def execute(self, context: Any, event_queue: Any) -> None:
        from a2a.helpers.proto_helpers import new_task
        from a2a.types import TaskState

        ids = {"task_id": context.task_id, "context_id": context.context_id}
        state = TaskState.TASK_STATE_WORKING
        await event_queue.enqueue_event(new_task(**ids, state=state, history=[context.message]))
        await asyncio.Event().wait()

    async def cancel(self, context: Any, event_queue: Any) -> None:
        pass


async def _warnings_of_closing_running_runs(
    caplog: pytest.LogCaptureFixture, corrected: bool
) -> list[str]:
    handler = DefaultRequestHandler(
        agent_executor=_Forever(), task_store=InMemoryTaskStore(), agent_card=agent_card("http://x")
    )
    drop_late_run_events(handler)  # as ours does: the streams' queue closes once already
    if corrected:
        quiet_forced_closes(handler)
    later = SendMessageConfiguration(return_immediately=True)
    for i in range(RUNS):
        message = Message(message_id=f"m{i}", role=Role.ROLE_USER, parts=[Part(text="go")])
        request = SendMessageRequest(message=message, configuration=later)
        await handler.on_message_send(request, ServerCallContext())
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        await handler.aclose()
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_the_sdk_warns_once_per_run_it_closes(caplog: pytest.LogCaptureFixture) -> None:
    said = "Dispatcher task is not running. Cannot wait for event dispatch."
    assert await _warnings_of_closing_running_runs(caplog, corrected=False) == [said] * RUNS


async def test_the_correction_closes_them_quietly(caplog: pytest.LogCaptureFixture) -> None:
    assert await _warnings_of_closing_running_runs(caplog, corrected=True) == []
