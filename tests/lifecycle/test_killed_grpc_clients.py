"""cancel_on_disconnect when a gRPC client's process dies mid-stream: SIGKILL closes its
connection with every stream on it, and each stream's task ends canceled.

The client (the official a2a-sdk one, ``_grpc_stream_client.py``) stops reading after
each stream's first event. Every other stream's module streams more than a stream may
send unread, so its next item waits on flow control in the agent's send; the others' wait
for their module's next item. Fifty streams at once, half of each kind: the drop must be
seen wherever the cancel lands (a detection blind to either place stopped 24 or 25 of the
50 modules).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from a2a.types import GetTaskRequest, TaskState

from .._support import free_port
from ..bindings._grpc import stubs
from ._agent import Agent, agent_server

STREAMS = 50
#: two chunks per task: 256 KiB ones (past the 64 KiB a stream may send unread, without
#: BDP probing), and 1 KiB ones (all sent at once)
CHUNKS, SIZES = 2, (256 * 1024, 1024)
CLIENT = Path(__file__).with_name("_grpc_stream_client.py")
#: a hang guard, not a speed check
GUARD = 60.0


async def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


async def _streamed_then_killed(agent: Agent) -> list[str]:
    """Run the client process until its streams are open and flooded, SIGKILL it; return
    the streams' task ids."""
    sizes = ",".join(map(str, SIZES))
    args = [str(CLIENT), agent.url, str(STREAMS), str(CHUNKS), sizes]
    child = await asyncio.create_subprocess_exec(
        sys.executable, *args, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        ids = []
        for _ in range(STREAMS):
            line = await asyncio.wait_for(child.stdout.readline(), GUARD)
            assert line, f"the client exited ({await child.wait()}) before its streams opened"
            ids.append(line.decode().strip())
        for task_id in ids:
            flooded = agent.probe.done(f"{task_id}:flooded")
            await _until(flooded.is_set, "a module did not stream its chunks")
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
    return ids


async def _stopped(agent: Agent, ids: list[str]) -> int:
    """How many of the modules of *ids* are stopped, once all are or the guard passed."""
    ended = [agent.probe.done(task_id) for task_id in ids]
    deadline = time.monotonic() + GUARD
    while not all(e.is_set() for e in ended) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return sum(e.is_set() for e in ended)


async def _settled_states(agent: Agent, ids: list[str]) -> list[str]:
    """The state of each task once it left WORKING, read with GetTask over gRPC."""
    address = f"127.0.0.1:{agent.state.settings.grpc_port}"
    states = []
    async with stubs(address) as (v1, _v03):
        for task_id in ids:
            deadline = time.monotonic() + GUARD
            while True:
                task = await v1.GetTask(GetTaskRequest(id=task_id))
                if task.status.state != TaskState.TASK_STATE_WORKING:
                    break
                assert time.monotonic() < deadline, f"task {task_id} is still working"
                await asyncio.sleep(0.02)
            states.append(TaskState.Name(task.status.state))
    return states


async def test_every_stream_of_a_killed_grpc_client_cancels_its_task(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = {
        "cancel_on_disconnect": True,
        "grpc_port": free_port(),
        "max_streams": STREAMS,
        "max_streams_per_caller": STREAMS,
    }
    async with agent_server(caplog, **settings) as agent:
        try:
            ids = await _streamed_then_killed(agent)
            stopped = await _stopped(agent, ids)
        finally:
            agent.probe.gate.set()  # a run left going ends before the agent stops
        assert stopped == STREAMS, f"{stopped}/{STREAMS} modules were stopped"
        assert [agent.probe.token_seen_cancelled[task_id] for task_id in ids] == [True] * STREAMS
        assert await _settled_states(agent, ids) == ["TASK_STATE_CANCELED"] * STREAMS
        await _until(lambda: agent.state.streams.active == 0, "a stream slot is still held")
