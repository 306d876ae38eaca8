"""1,000 tasks in flight at once, mixing blocking sends, streams, cancels and approvals.

The agent runs in the test's own event loop (real uvicorn on 127.0.0.1), so after it
stops the test can count asyncio tasks and file descriptors against the numbers from
before it started. A gate module holds every task open until all 1,000 are in the store
(``returnImmediately`` sends, parked approvals, held blocking sends, open streams); then
cancels and approval answers go in, the gate opens, and every task must end in the state
its scenario implies. Client concurrency is bounded (2 cores); the store's is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections import Counter
from typing import Any

import httpx
import pytest

from apcore_a2a import A2AServerFactory

from .._support import TLS, free_port, running_server
from . import _report
from ._load import (
    TERMINAL,
    V1,
    all_tasks,
    call,
    message,
    output,
    send,
    sse_payloads,
    wait_all_terminal,
)
from ._modules import Controls, build_executor

NOWAIT = 500  # returnImmediately sends that complete when the gate opens
CANCEL = 150  # returnImmediately sends canceled while held
APPROVE, REJECT, CANCEL_PARKED = 100, 60, 40  # approvals parked in input-required
BLOCKING = 100  # blocking sends held open by the gate
STREAMS = 50  # = max_streams: all open at once
EXTRA_STREAMS = 10  # over the cap: 503, then retried after the gate opens
IN_FLIGHT = NOWAIT + CANCEL + APPROVE + REJECT + CANCEL_PARKED + BLOCKING + STREAMS
TALLY = _report.tally("load: 1,000 tasks")
#: Hang guards only (the client's read, the modules' and the agent's deadlines, the waits):
#: the held phase lasts as long as the machine takes to send 1,000 tasks, over 120 s on a
#: loaded one, which ended the held modules and the blocking sends' reads before the gate
#: opened. Below pytest's own 600 s, which ends a test that truly hangs.
GUARD = 540


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _pending_tasks() -> list[asyncio.Task[Any]]:
    current = asyncio.current_task()
    return [t for t in asyncio.all_tasks() if t is not current and not t.done()]


async def _stream(
    http: httpx.AsyncClient, key: int, opened: asyncio.Event | None
) -> tuple[int, list[dict[str, Any]], str | None]:
    body = {
        "jsonrpc": "2.0",
        "id": key,
        "method": "SendStreamingMessage",
        "params": {"message": message("rel.stream_gate", {"key": key})},
    }
    async with http.stream("POST", "/", json=body, headers=V1) as response:
        if response.status_code != 200:
            await response.aread()
            return response.status_code, [response.json()], response.headers.get("retry-after")
        events: list[dict[str, Any]] = []
        async for line in response.aiter_lines():
            events += sse_payloads([line])
            if opened is not None and len(events) == 1:
                opened.set()
        return 200, events, None


def _stream_result(events: list[dict[str, Any]]) -> tuple[str, str]:
    task_id = events[0]["result"]["task"]["id"]
    last = events[-1]["result"]
    state = (
        last["statusUpdate"]["status"]["state"]
        if "statusUpdate" in last
        else last["task"]["status"]["state"]
    )
    return task_id, state


async def test_1000_tasks_end_as_their_scenario_says(caplog: pytest.LogCaptureFixture) -> None:
    gc.collect()
    fds_before = _fds()
    tasks_before = len(_pending_tasks())
    controls = Controls(gate=asyncio.Event())
    port = free_port()
    # One client plays every caller here: the per-caller quotas (tested on their own in
    # tests/lifecycle) are off, so the agent-wide limits are what this load meets.
    app, _ = A2AServerFactory(
        build_executor(controls, timeout_ms=GUARD * 1000),
        environ={},
        port=port,
        name="load",
        max_streams=STREAMS,
        max_streams_per_caller=0,
        max_unfinished_tasks_per_caller=0,
        execution_timeout=GUARD,
    ).create()
    limits = httpx.Limits(
        max_connections=BLOCKING + STREAMS + EXTRA_STREAMS + 40, max_keepalive_connections=40
    )
    expected: dict[str, str] = {}
    results: dict[str, Any] = {}
    async with (
        running_server(app, port=port) as url,
        httpx.AsyncClient(base_url=url, limits=limits, timeout=GUARD, verify=TLS) as http,
    ):
        sem = asyncio.Semaphore(16)

        async def bounded(coro: Any) -> Any:
            async with sem:
                return await coro

        # -- held: streams first, so exactly STREAMS are open when the extra ones come
        opened = [asyncio.Event() for _ in range(STREAMS)]
        streams = [asyncio.create_task(_stream(http, i, opened[i])) for i in range(STREAMS)]
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in opened)), GUARD)
        over = await asyncio.gather(*(_stream(http, 1000 + i, None) for i in range(EXTRA_STREAMS)))
        assert [(status, retry) for status, _, retry in over] == [(503, "5")] * EXTRA_STREAMS
        assert app.state.a2a.streams.rejected == EXTRA_STREAMS

        blocking = [
            asyncio.create_task(send(http, message("rel.gate", {"key": 2000 + i})))
            for i in range(BLOCKING)
        ]
        nowait = await asyncio.gather(
            *(
                bounded(send(http, message("rel.gate", {"key": i}), return_immediately=True))
                for i in range(NOWAIT + CANCEL)
            )
        )
        parked = await asyncio.gather(
            *(
                bounded(send(http, message("rel.transfer", {"to": f"acct{i}", "amount": i + 1})))
                for i in range(APPROVE + REJECT + CANCEL_PARKED)
            )
        )
        assert {t["status"]["state"] for t in parked} == {"TASK_STATE_INPUT_REQUIRED"}

        # -- every one of them is in the store and not finished
        listed = await all_tasks(http)
        live = [t for t in listed.values() if t["status"]["state"] not in TERMINAL]
        assert len(listed) == IN_FLIGHT  # the 503'd streams created no task
        assert len(live) == IN_FLIGHT == 1000

        # -- cancels and approval answers while everything is held
        for i, task in enumerate(nowait):
            expected[task["id"]] = "TASK_STATE_COMPLETED" if i < NOWAIT else "TASK_STATE_CANCELED"
            results[task["id"]] = {"key": i} if i < NOWAIT else None
        to_cancel = [t["id"] for t in nowait[NOWAIT:]] + [
            t["id"] for t in parked[APPROVE + REJECT :]
        ]
        canceled = await asyncio.gather(
            *(bounded(call(http, "CancelTask", {"id": i})) for i in to_cancel)
        )
        assert {c["result"]["status"]["state"] for c in canceled} == {"TASK_STATE_CANCELED"}
        answers = [{"approved": True}] * APPROVE + [
            {"approved": False, "reason": "load test"}
        ] * REJECT
        decided = await asyncio.gather(
            *(
                bounded(send(http, message(None, a, task_id=t["id"])))
                for t, a in zip(parked, answers, strict=False)
            )
        )
        for i, task in enumerate(parked):
            if i < APPROVE:
                expected[task["id"]] = "TASK_STATE_COMPLETED"
                results[task["id"]] = {"status": "sent", "to": f"acct{i}", "amount": i + 1}
            else:
                expected[task["id"]] = (
                    "TASK_STATE_REJECTED" if i < APPROVE + REJECT else "TASK_STATE_CANCELED"
                )
        assert Counter(d["status"]["state"] for d in decided) == {
            "TASK_STATE_COMPLETED": APPROVE,
            "TASK_STATE_REJECTED": REJECT,
        }

        # -- open the gate; the refused streams come back and get through
        controls.gate.set()
        held_streams = await asyncio.gather(*streams)
        retried = await asyncio.gather(
            *(_stream(http, 1000 + i, None) for i in range(EXTRA_STREAMS))
        )
        for i, task in enumerate(await asyncio.gather(*blocking)):
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
            expected[task["id"]] = "TASK_STATE_COMPLETED"
            results[task["id"]] = {"key": 2000 + i}
        for status, events, _ in [*held_streams, *retried]:
            assert status == 200
            task_id, state = _stream_result(events)
            assert state == "TASK_STATE_COMPLETED"
            expected[task_id] = state

        # -- what the store says at the end
        final = await wait_all_terminal(http, expected, GUARD)
        assert len(expected) == len(final) == IN_FLIGHT + EXTRA_STREAMS
        wrong = {
            i: (final[i]["status"]["state"], want)
            for i, want in expected.items()
            if final[i]["status"]["state"] != want
        }
        assert not wrong, f"{len(wrong)} tasks in the wrong state, e.g. {list(wrong.items())[:5]}"
        bad_output = {
            i: output(final[i])
            for i, want in results.items()
            if want is not None and output(final[i]) != want
        }
        assert not bad_output, list(bad_output.items())[:5]
        assert (await http.get("/health")).status_code == 200

    # -- after shutdown: nothing left running, no descriptor kept
    leftovers = [
        t
        for t in _pending_tasks()
        if getattr(t.get_coro(), "__qualname__", "") != "_shutdown_watcher"
    ]
    for task in _pending_tasks():  # sse-starlette's one watcher per loop (see tests/lifecycle)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    gc.collect()
    fds_after = _fds()
    TALLY.cases += len(expected)
    TALLY.lost_tasks = len(expected) - len(final)
    TALLY.leaked_tasks = max(0, len(leftovers) - tasks_before)
    TALLY.leaked_fds = max(0, fds_after - fds_before)
    TALLY.notes.append(f"503 on the stream cap: {EXTRA_STREAMS}; fds {fds_before}->{fds_after}")
    assert not leftovers, leftovers
    assert fds_after <= fds_before, (fds_before, fds_after)
    destroyed = [
        r.getMessage()
        for r in caplog.records
        if "Task was destroyed but it is pending" in r.getMessage()
    ]
    assert not destroyed, destroyed[:3]
