"""Callers share the ``sync_workers`` threads: when every thread is busy, the calls waiting
for one are served one caller at a time, in turn (``execution/fair_pool.py``), and with
``sync_workers_per_caller`` one caller holds at most that many threads.

Each call of ``fair.hold`` blocks its thread on an event of its own (its ``gate``), so the
test decides which call returns next; no clock is involved. Callers are anonymous
addresses (``ip:127.0.0.1``, ``ip:127.0.0.2``) or API keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from a2a.types import CancelTaskRequest, GetTaskRequest, TaskState
from apcore import Executor, Registry
from pydantic import BaseModel

from apcore_a2a import A2AServerFactory
from tests._sdk import make_client, request

from .._support import free_port, running_server
from ._agent import assert_no_leaks
from ._client import sdk_client

COMPLETED, CANCELED = TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED
FAILED = TaskState.TASK_STATE_FAILED
KEYS = {"a": "caller-a-key-0123456789", "b": "caller-b-key-0123456789"}


class GateIn(BaseModel):
    gate: str


class GateOut(BaseModel):
    gate: str


@dataclass
class Gates:
    """``fair.hold``: a sync module whose call *gate* ("a3": caller a's fourth) records that
    it started and holds its thread until the test opens that gate."""

    input_schema = GateIn
    output_schema = GateOut
    description = "Hold a thread until the test opens this call's gate"
    started: list[str] = field(default_factory=list)
    running: Counter[str] = field(default_factory=Counter)
    peak: Counter[str] = field(default_factory=Counter)
    opened: dict[str, threading.Event] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    all_open: bool = False

    def gate(self, name: str) -> threading.Event:
        with self.lock:
            event = self.opened.setdefault(name, threading.Event())
            if self.all_open:
                event.set()
            return event

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        name, caller = inputs["gate"], inputs["gate"][0]
        with self.lock:
            self.started.append(name)
            self.running[caller] += 1
            self.peak[caller] = max(self.peak[caller], self.running[caller])
        try:
            self.gate(name).wait(timeout=60)
        finally:
            with self.lock:
                self.running[caller] -= 1
        return {"gate": name}

    def open_all(self) -> None:
        with self.lock:
            self.all_open = True
            for event in self.opened.values():
                event.set()


@contextlib.asynccontextmanager
async def _agent(caplog: pytest.LogCaptureFixture, **settings: Any) -> AsyncIterator[Any]:
    gates = Gates()
    registry = Registry()
    registry.register("fair.hold", gates)
    port = free_port()
    app, _card = A2AServerFactory(
        Executor(registry), environ={}, port=port, name="fair", process_tuning=True, **settings
    ).create()
    try:
        async with running_server(app, port=port) as url:
            yield url, gates
    finally:
        gates.open_all()
    await assert_no_leaks(caplog)


@contextlib.asynccontextmanager
async def _keyed_callers(url: str) -> AsyncIterator[tuple[Any, Any]]:
    """Clients of callers a and b, each with its API key."""
    a = await sdk_client(url, streaming=False, headers={"X-API-Key": KEYS["a"]})
    b = await sdk_client(url, streaming=False, headers={"X-API-Key": KEYS["b"]})
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"{what} not reached within 30s"
        await asyncio.sleep(0.01)


async def _send(client: Any, gate: str) -> str:
    """Send a ``fair.hold`` call answered at once (its task runs on); its task id."""
    async for response in client.send_message(
        request("fair.hold", {"gate": gate}, return_immediately=True)
    ):
        return str(response.task.id)
    raise AssertionError("no task returned")


async def _finished(client: Any, task_ids: list[str], state: int = COMPLETED) -> None:
    async def ended() -> bool:
        tasks = [await client.get_task(GetTaskRequest(id=t)) for t in task_ids]
        return all(t.status.state == state for t in tasks)

    deadline = time.monotonic() + 30
    while not await ended():
        assert time.monotonic() < deadline, f"tasks not {TaskState.Name(state)} within 30s"
        await asyncio.sleep(0.02)


async def test_a_second_caller_is_served_while_the_first_ones_flood_still_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Two threads, a caller may hold both; anonymous caller a (127.0.0.1) holds both and
    # has four more waiting, then caller b (127.0.0.2) sends one. First come, first served
    # ran all of a's first.
    async with _agent(caplog, sync_workers=2, sync_workers_per_caller=2) as (url, gates):
        a = await sdk_client(url, streaming=False)
        b_address = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
        b = await sdk_client(url, streaming=False, transport=b_address)
        try:
            tasks = [await _send(a, "a0"), await _send(a, "a1")]
            await _until(lambda: len(gates.started) == 2, "a's first two calls running")
            tasks += [await _send(a, f"a{i}") for i in range(2, 6)]
            tasks.append(await _send(b, "b0"))
            # Each returning call frees its thread for exactly one waiting call.
            while "b0" not in gates.started:
                running = len(gates.started)
                gates.gate(gates.started[running - 2]).set()
                await _until(lambda n=running + 1: len(gates.started) == n, "the next call")
            waiting = {f"a{i}" for i in range(6)} - set(gates.started)
            assert waiting, "b's call waited for every call of a's flood"
            gates.open_all()
            await _finished(a, tasks)
        finally:
            await a.close()
            await b.close()
    assert sorted(gates.started) == ["a0", "a1", "a2", "a3", "a4", "a5", "b0"]


async def test_a_caller_holds_at_most_its_share_and_its_other_calls_wait_their_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    keys = tuple(KEYS.values())
    async with (
        _agent(caplog, sync_workers=4, sync_workers_per_caller=2, api_keys=keys) as (
            url,
            gates,
        ),
        _keyed_callers(url) as (a, b),
    ):
        tasks = [await _send(a, f"a{i}") for i in range(4)]
        await _until(lambda: gates.running["a"] == 2, "a's share running")
        # Two threads are still free for b though a has calls waiting.
        others = [await _send(b, "b0"), await _send(b, "b1")]
        await _until(lambda: gates.running["b"] == 2, "b's two calls running")
        # b's threads come free; a, at its share, does not take them: b's next call does.
        gates.gate("b0").set()
        gates.gate("b1").set()
        others.append(await _send(b, "b2"))
        await _until(lambda: "b2" in gates.started, "b's third call running")
        assert gates.running["a"] == 2
        gates.open_all()
        await _finished(a, tasks)
        await _finished(b, others)
    # Every call of a's ran (none refused), never more than two at once.
    assert sorted(n for n in gates.started if n[0] == "a") == ["a0", "a1", "a2", "a3"]
    assert gates.peak["a"] == 2


async def test_a_canceled_waiting_call_never_runs_and_frees_no_thread(
    caplog: pytest.LogCaptureFixture,
) -> None:
    keys = tuple(KEYS.values())
    async with (
        _agent(caplog, sync_workers=2, sync_workers_per_caller=1, api_keys=keys) as (
            url,
            gates,
        ),
        _keyed_callers(url) as (a, b),
    ):
        first = await _send(a, "a0")
        await _until(lambda: gates.started == ["a0"], "a's first call running")
        waiting = await _send(a, "a1")
        canceled = await a.cancel_task(CancelTaskRequest(id=waiting))
        assert canceled.status.state == CANCELED
        # The cancel gave back no thread of a's: its next call still waits for a0,
        # and b's call takes the free thread.
        later = await _send(a, "a2")
        other = await _send(b, "b0")
        await _until(lambda: "b0" in gates.started, "b's call running")
        assert gates.started == ["a0", "b0"]
        gates.gate("a0").set()
        await _until(lambda: "a2" in gates.started, "a's next call running")
        gates.open_all()
        await _finished(a, [first, later])
        await _finished(b, [other])
        await _finished(a, [waiting], CANCELED)
    assert gates.started == ["a0", "b0", "a2"]


async def test_a_waiting_call_whose_client_hangs_up_never_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # cancel_on_disconnect: the dropped stream cancels its task while its call still waits
    # for the one thread.
    async with _agent(caplog, sync_workers=1, cancel_on_disconnect=True) as (url, gates):
        a = await sdk_client(url, streaming=False)
        streamer = await sdk_client(url)
        try:
            first = await _send(a, "a0")
            await _until(lambda: gates.started == ["a0"], "a's first call running")
            async for event in streamer.send_message(request("fair.hold", {"gate": "a1"})):
                dropped = event.task.id  # the stream's first event: hang up now
                break
            await streamer.close()
            await _finished(a, [dropped], CANCELED)
            gates.gate("a0").set()
            later = await _send(a, "a2")
            await _until(lambda: "a2" in gates.started, "a's next call running")
            gates.open_all()
            await _finished(a, [first, later])
        finally:
            await a.close()
            await streamer.close()
    assert gates.started == ["a0", "a2"]


async def test_by_default_one_callers_hung_calls_leave_threads_to_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # sync_workers_per_caller unset: a caller holds at most 3 of 4 threads. Caller a's
    # calls hang past execution_timeout (a thread cannot be killed), so its tasks fail and
    # free its quota while their threads stay held; its next call waits for one of its own
    # and is refused at its timeout without running (test_no_worker_refusal.py), and
    # caller b still gets the fourth thread.
    keys = tuple(KEYS.values())
    async with (
        _agent(caplog, sync_workers=4, execution_timeout=2.0, api_keys=keys) as (url, gates),
        _keyed_callers(url) as (a, b),
    ):
        hung = [await _send(a, f"a{i}") for i in range(3)]
        await _until(lambda: gates.running["a"] == 3, "a's three calls running")
        await _finished(a, hung, FAILED)
        late = await _send(a, "a3")
        await _finished(a, [late], TaskState.TASK_STATE_REJECTED)
        refused = await a.get_task(GetTaskRequest(id=late))
        assert refused.status.message.parts[0].text.endswith("; retry later")
        other = await _send(b, "b0")
        await _until(lambda: "b0" in gates.started, "b's call running")
        gates.gate("b0").set()
        await _finished(b, [other])
        assert gates.running["a"] == 3
    assert "a3" not in gates.started


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_queued_call_canceled_leaves_at_once_and_a_held_share_delays_no_other(
    binding: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Caller a (127.0.0.1, over *binding*) holds its share, one of two threads, with a call
    # waiting behind it; caller b (127.0.0.2) is served meanwhile, and a's waiting call,
    # canceled, is canceled at once and never runs: a's next call is the one a0's thread
    # serves.
    async with _agent(caplog, sync_workers=2, sync_workers_per_caller=1, grpc_port=free_port()) as (
        url,
        gates,
    ):
        a = await make_client(url, binding, "1.0")
        b_address = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
        b = await sdk_client(url, streaming=False, transport=b_address)
        try:
            first = await _send(a, "a0")
            await _until(lambda: gates.started == ["a0"], "a's first call running")
            queued = await _send(a, "a1")
            gates.gate("b0").set()
            served = await asyncio.wait_for(_send_blocking(b, "b0"), 30)
            assert served.status.state == COMPLETED
            canceled = await a.cancel_task(CancelTaskRequest(id=queued))
            assert canceled.status.state == CANCELED
            later = await _send(a, "a2")
            gates.gate("a0").set()
            await _until(lambda: "a2" in gates.started, "a's next call running")
            gates.open_all()
            await _finished(a, [first, later])
            assert (await a.get_task(GetTaskRequest(id=queued))).status.state == CANCELED
        finally:
            await a.close()
            await b.close()
    assert gates.started == ["a0", "b0", "a2"]


async def _send_blocking(client: Any, gate: str) -> Any:
    """Send a ``fair.hold`` call and wait for its task to end."""
    result: Any = None
    async for response in client.send_message(request("fair.hold", {"gate": gate})):
        result = response.task
    return result
