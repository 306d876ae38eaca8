"""``apcore-a2a task resubscribe URL TASK_ID`` as a subprocess against live agents.

Our agent runs ``demo.gated``: it streams step 1 and waits for the test's gate, so the
command joins the task's stream mid-way, and the test opens the gate only once the command
printed the task as it is now: the steps after it reach the command live. A plain a2a-sdk
agent's task is followed until the test cancels it. A task that ends ``failed`` or
``canceled`` exits 7 or 9 as ``call`` does; a finished task is the spec's
``UnsupportedOperationError`` (A2A 1.0.1 §3.1.6: no subscription to a terminal task), an
unknown id ``TaskNotFoundError``, both exit 1; a blank argument exits 2 before any request.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from apcore_a2a.client import A2AClient
from tests._support import ROOT, cli, free_port, running_server
from tests._support import json_lines as lines
from tests.client._apcore_agent import GATES, build_our_app
from tests.client._sdk_agent import build_sdk_app

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: the longest the test waits for the command's next line (a hang fails, never a pass)
LINE_WAIT = 60


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ours() -> AsyncIterator[str]:
    port = free_port()
    async with running_server(build_our_app(port), port=port) as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sdk() -> AsyncIterator[str]:
    port = free_port()
    async with running_server(build_sdk_app(f"http://127.0.0.1:{port}"), port=port) as url:
        yield url


class Following:
    """``task resubscribe`` running as a subprocess: its stdout read a line at a time."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def event(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), LINE_WAIT)
        assert line, "the command ended before its next event"
        event: dict[str, Any] = json.loads(line)
        return event

    async def end(self) -> tuple[int, list[dict[str, Any]], str]:
        """The exit code, the events printed after those read, and stderr."""
        out, err = await asyncio.wait_for(self.proc.communicate(), LINE_WAIT)
        assert self.proc.returncode is not None
        return self.proc.returncode, lines(out.decode()), err.decode()


async def _follow(*args: str) -> Following:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "apcore_a2a",
        "task",
        "resubscribe",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    return Following(proc)


async def _gated_task(url: str, gate: str, *, fail: bool = False) -> str:
    """A ``demo.gated`` task that streamed step 1 and waits at *gate*."""
    GATES[gate] = asyncio.Event()
    async with A2AClient(url) as client:
        async for event in client.stream_message(
            {"gate": gate, "fail": fail}, skill_id="demo.gated"
        ):
            if event["kind"] == "artifact-update":  # step 1: the task waits at the gate
                return str(event["taskId"])
    raise AssertionError("the stream ended before step 1")


def _steps(events: list[dict[str, Any]]) -> list[Any]:
    return [
        part["data"]["step"]
        for event in events
        if event["kind"] == "artifact-update"
        for part in event["artifact"]["parts"]
    ]


async def test_resubscribe_mid_stream_prints_the_task_then_the_rest(ours: str) -> None:
    task_id = await _gated_task(ours, "rest")
    following = await _follow(ours, task_id)
    first = await following.event()  # the task as it is now: working, step 1 in it
    assert (first["kind"], first["id"], first["status"]["state"]) == ("task", task_id, "working")
    GATES["rest"].set()
    code, rest, err = await following.end()
    assert (code, err) == (0, "")
    assert _steps(rest) == [2, 3]
    assert {e["taskId"] for e in rest} == {task_id}
    last = rest[-1]
    assert (last["kind"], last["status"]["state"], last["final"]) == (
        "status-update",
        "completed",
        True,
    )


async def test_a_task_that_fails_while_followed_exits_7(ours: str) -> None:
    task_id = await _gated_task(ours, "fail", fail=True)
    following = await _follow(ours, task_id)
    assert (await following.event())["status"]["state"] == "working"
    GATES["fail"].set()
    code, rest, err = await following.end()
    assert code == 7, err
    assert rest[-1]["status"]["state"] == "failed"
    assert err.startswith(f"error: task {task_id} failed") and err.count("\n") == 1, err


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_a_plain_sdk_agents_task_canceled_while_followed_exits_9(
    sdk: str, protocol: str
) -> None:
    async with A2AClient(sdk, protocol=protocol) as client:
        task = await client.send_message("slow", return_immediately=True)
        following = await _follow(sdk, task["id"], "--protocol", protocol)
        first = await following.event()
        assert (first["kind"], first["id"]) == ("task", task["id"])
        await client.cancel_task(task["id"])
    code, rest, err = await following.end()
    assert code == 9, err
    assert rest[-1]["status"]["state"] == "canceled"
    assert err == f"error: task {task['id']} canceled\n"


@pytest.mark.parametrize("agent", ["ours", "sdk"])
async def test_a_finished_task_is_the_specs_unsupported_operation(
    agent: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(agent)
    async with A2AClient(url) as client:
        task = await client.send_message("hi", skill_id="demo.echo" if agent == "ours" else None)
    assert task["status"]["state"] == "completed"
    code, out, err = await cli("task", "resubscribe", url, task["id"])
    assert (code, out) == (1, "")
    assert err.startswith("error: UnsupportedOperationError (-32004): "), err
    assert err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_an_unknown_task_id_is_task_not_found(ours: str, protocol: str) -> None:
    code, out, err = await cli("task", "resubscribe", ours, "no-such-task", "--protocol", protocol)
    assert (code, out) == (1, "")
    assert err.startswith("error: TaskNotFoundError (-32001): "), err
    assert err.count("\n") == 1, err


@pytest.mark.parametrize("blank", ["", " "])
async def test_a_blank_task_id_is_bad_input(ours: str, blank: str) -> None:
    code, out, err = await cli("task", "resubscribe", ours, blank)
    assert (code, out) == (2, "")
    assert err == f"error: TASK_ID: must not be empty, got {blank!r}\n"


async def test_timeout_bounds_the_whole_wait_and_says_how_to_follow_again(ours: str) -> None:
    task_id = await _gated_task(ours, "timeout")
    try:
        code, out, err = await cli("task", "resubscribe", ours, task_id, "--timeout", "1")
    finally:
        GATES["timeout"].set()
    assert code == 6, err
    assert lines(out)[0]["id"] == task_id
    assert err == (
        f"error: task {task_id} is still working after --timeout 1 s; it runs on: follow it "
        f"with: apcore-a2a task resubscribe {ours} {task_id}\n"
    )
