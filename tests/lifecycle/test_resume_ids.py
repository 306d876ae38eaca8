"""A resumed subscription (``Last-Event-ID``) on ids the task never sent, and clients that
leave before its first event.

``life.gate`` keeps its task ``working`` without a new event until the test opens the
gate, so a subscription resumed from the task's latest id has nothing to send yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx
import pytest

from tests._support import TLS

from ._agent import Agent, agent_server
from ._client import V1, rpc, wire_message, wire_message_03

#: an id far past any the agent sent (the 18 digits the parser takes)
FUTURE_ID = "9" * 18


async def _gated_task(http: httpx.AsyncClient) -> tuple[str, str]:
    """A ``life.gate`` task, working; its id and the SSE id of its latest event."""
    body = rpc("SendStreamingMessage", {"message": wire_message("life.gate", {})})
    last: str | None = None
    task_id = ""
    async with http.stream("POST", "/", json=body, headers=V1) as response:
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                last = line[3:].strip()
            if line.startswith("data:"):
                result = json.loads(line[5:])["result"]
                task_id = task_id or result["task"]["id"]
                if "TASK_STATE_WORKING" in line:
                    break
    assert task_id and last is not None
    return task_id, last


def _subscriptions(task_id: str, last_id: str) -> list[tuple[str, dict[str, str], Any]]:
    """(path, headers, body) of a resumed subscription in each binding and version."""
    v03 = {"A2A-Version": "0.3"}
    resubscribe = {"id": task_id, "metadata": {"lastEventId": last_id}}
    return [
        ("/", {**V1, "Last-Event-ID": last_id}, rpc("SubscribeToTask", {"id": task_id})),
        ("/", v03, rpc("tasks/resubscribe", resubscribe)),
        (f"/tasks/{task_id}:subscribe", {**V1, "Last-Event-ID": last_id}, None),
        (f"/v1/tasks/{task_id}:subscribe", {**v03, "Last-Event-ID": last_id}, None),
    ]


async def _wait_for_no_stream(agent: Agent) -> None:
    for _ in range(400):  # a hang guard: the slots come back as soon as the server sees it
        if agent.state.streams.active == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{agent.state.streams.active} stream slots still held")


async def test_an_event_id_the_task_never_reached_is_invalid_params(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with (
        agent_server(caplog) as agent,
        httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http,
    ):
        task_id, _last = await _gated_task(http)
        try:
            for path, headers, body in _subscriptions(task_id, FUTURE_ID):
                answer = await http.post(path, json=body, headers=headers)
                if path == "/":
                    assert answer.status_code == 200, answer.text
                    text = answer.text.removeprefix("data:").strip()  # 0.3: an error frame
                    error = json.loads(text)["error"]
                    assert error["code"] == -32602, (headers, error)
                else:
                    assert answer.status_code == 400, (path, answer.text)
                    error = answer.json()["error"]
                    assert error["status"] == "INVALID_ARGUMENT", (path, error)
                assert "Last-Event-ID" in error["message"]
                assert "Traceback" not in answer.text and ".py" not in answer.text
            await _wait_for_no_stream(agent)
        finally:
            assert agent.probe.gate is not None
            agent.probe.gate.set()
        # The task went on as before.
        got = await http.post("/", json=rpc("GetTask", {"id": task_id}), headers=V1)
        for _ in range(200):
            if got.json()["result"]["status"]["state"] == "TASK_STATE_COMPLETED":
                break
            await asyncio.sleep(0.05)
            got = await http.post("/", json=rpc("GetTask", {"id": task_id}), headers=V1)
        assert got.json()["result"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_resume_whose_client_leaves_before_the_next_event_gives_its_slot_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with agent_server(caplog, max_streams_per_caller=2) as agent:
        async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:
            task_id, last = await _gated_task(http)
        try:
            for path, headers, body in _subscriptions(task_id, last) * 2:
                # Nothing follows *last* while the gate is shut: the client gives up.
                async with httpx.AsyncClient(
                    base_url=agent.url, timeout=0.3, verify=TLS
                ) as gives_up:
                    with contextlib.suppress(httpx.ReadTimeout):
                        await gives_up.post(path, json=body, headers=headers)
            await _wait_for_no_stream(agent)
            # The caller's quota (2) is whole again: two resumed subscriptions at once.
            async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:

                async def follow(path: str, headers: dict[str, str], body: Any) -> str:
                    answer = await http.post(path, json=body, headers=headers)
                    assert answer.status_code == 200, answer.text
                    return answer.text

                followers = [
                    asyncio.create_task(follow(*call)) for call in _subscriptions(task_id, last)[:2]
                ]
                for _ in range(400):  # a hang guard
                    if agent.state.streams.active == 2:
                        break
                    await asyncio.sleep(0.05)
                assert agent.state.streams.active == 2
                assert agent.probe.gate is not None
                agent.probe.gate.set()
                for text in await asyncio.gather(*followers):
                    assert "completed" in text.lower(), text
        finally:
            assert agent.probe.gate is not None
            agent.probe.gate.set()
        await _wait_for_no_stream(agent)


async def test_a_v03_rest_resume_after_the_last_event_is_an_empty_stream(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client that saw the terminal event and resumes from it (an ``EventSource``
    reconnecting) gets a stream with nothing in it, on 0.3 REST as on the others."""
    async with (
        agent_server(caplog) as agent,
        httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http,
    ):
        body = rpc("message/stream", {"message": wire_message_03("life.echo", {"text": "hi"})})
        last: str | None = None
        task_id = ""
        async with http.stream("POST", "/", json=body, headers={"A2A-Version": "0.3"}) as answer:
            async for line in answer.aiter_lines():
                if line.startswith("id:"):
                    last = line[3:].strip()
                if line.startswith("data:"):
                    event = json.loads(line[5:])["result"]
                    task_id = event.get("taskId") or event["id"]
        assert last is not None and task_id
        for path, headers, sub in _subscriptions(task_id, last):
            async with http.stream("POST", path, json=sub, headers=headers) as answer:
                text = (await answer.aread()).decode()
                assert answer.status_code == 200, (path, text)
                assert answer.headers["content-type"].startswith("text/event-stream"), text
                assert "data:" not in text, (path, text)
        assert "Unknown error" not in caplog.text and "StopAsyncIteration" not in caplog.text


async def test_a_resume_from_the_start_replays_the_task_as_it_was_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The memory store's log keeps each event as it was sent: its first ``Task`` is the
    submitted one, not the task as it is now (the SDK goes on changing that object)."""
    async with (
        agent_server(caplog) as agent,
        httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http,
    ):
        task_id, _last = await _gated_task(http)
        assert agent.probe.gate is not None
        agent.probe.gate.set()
        for _ in range(400):  # a hang guard
            got = await http.post("/", json=rpc("GetTask", {"id": task_id}), headers=V1)
            if got.json()["result"]["status"]["state"] == "TASK_STATE_COMPLETED":
                break
            await asyncio.sleep(0.05)
        replayed: list[dict[str, Any]] = []
        body = rpc("SubscribeToTask", {"id": task_id})
        headers = {**V1, "Last-Event-ID": "0"}
        async with http.stream("POST", "/", json=body, headers=headers) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    replayed.append(json.loads(line[5:])["result"])
    first = replayed[0]["task"]
    assert first["status"]["state"] == "TASK_STATE_SUBMITTED", first
    assert "artifacts" not in first
    states = [r["statusUpdate"]["status"]["state"] for r in replayed if "statusUpdate" in r]
    assert states[0] == "TASK_STATE_WORKING" and states[-1] == "TASK_STATE_COMPLETED", states


async def test_every_event_has_an_id_when_the_stream_trims_the_task_history(
    agent: Agent,
) -> None:
    # historyLength makes the SDK send a trimmed copy of the task it noted: the copy is
    # matched by kind, so a client can resume from the task event too.
    params = {"message": wire_message("life.echo", {"text": "hi"})}
    body = rpc("SendStreamingMessage", {**params, "configuration": {"historyLength": 0}})
    ids: list[int] = []
    data: list[str] = []
    async with (
        httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http,
        http.stream("POST", "/", json=body, headers=V1) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                ids.append(int(line[3:]))
            elif line.startswith("data:"):
                data.append(line)
    assert '"task"' in data[0] and '"history"' not in data[0]
    assert len(ids) == len(data) and ids == sorted(ids), (ids, data)
