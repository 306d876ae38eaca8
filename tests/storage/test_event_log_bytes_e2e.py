"""The memory store's event log is bounded in bytes per task, not only in events.

Each follow-up to an ``input-required`` task logs the whole task, history and all, as one
event, and the log kept a task's last 100 events whatever their size: one conversation
answered with large messages held dozens of copies of its history (measured: 37.6 MB of
RSS per task at 100 KB answers, ``benchmarks/RESULTS.md``). A real server on
``memory://`` with ``task_event_log_bytes`` at 256 KiB: a conversation of 20 answers of
20 KB each holds no more than that bound and its latest event (before: 5.5 MB, every event
of the conversation); a resume from one of its dropped events is answered as the docs say
(-32602 / HTTP 400 "no longer kept" on JSON-RPC and REST, 1.0 and 0.3; gRPC, which has no
ids, 1.0 and 0.3, gets the task as it stands); another caller's parked task keeps its
log beside it.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import grpc.aio
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2, a2a_v0_3_pb2_grpc
from a2a.types import a2a_pb2, a2a_pb2_grpc
from apcore import Executor, Registry

from apcore_a2a import A2AServerFactory
from apcore_a2a.storage.event_log import MemoryEventLog

from .._modules import Talk
from .._support import TLS, find_key, free_port, sse_frames, threaded_server
from .test_resume_e2e import _subscribe_call

BOUND = 256 * 1024
ANSWER = 20_000  # characters of each answer
TURNS = 20
KEY_A, KEY_B = "key-a-0123456789", "key-b-0123456789"
A = {"X-API-Key": KEY_A, "A2A-Version": "1.0"}
B = {"X-API-Key": KEY_B, "A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def agent() -> Iterator[tuple[str, str, MemoryEventLog]]:
    registry = Registry()
    registry.register("talk.on", Talk())
    port, grpc_port = free_port(), free_port()
    app, _card = A2AServerFactory(
        Executor(registry),
        environ={},
        port=port,
        grpc_port=grpc_port,
        api_keys=(f"{KEY_A}=a", f"{KEY_B}=b"),
        task_event_log_bytes=BOUND,
    ).create()
    log = app.state.a2a.stores.event_log
    assert isinstance(log, MemoryEventLog)
    with threaded_server(app, port=port) as url:
        yield url, f"127.0.0.1:{grpc_port}", log


def _message(text: str, task_id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        "metadata": {"skillId": "talk.on"},
    }
    if task_id:
        message["taskId"] = task_id
    return message


def _rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


async def _started(http: httpx.AsyncClient, url: str, headers: dict[str, str]) -> list[str]:
    """A streamed first message of a new ``talk.on`` task: its events' SSE ids (the first
    event, the task, carries its id as ``result.task.id``)."""
    ids: list[str] = []
    body = _rpc("SendStreamingMessage", message=_message("hello"))
    async with (
        http.stream("POST", url + "/", json=body, headers=headers) as response,
        contextlib.aclosing(sse_frames(response)) as frames,
    ):
        async for event_id, payload in frames:
            assert event_id is not None, payload
            ids.append(event_id)
    return ids


async def _task_of(http: httpx.AsyncClient, url: str, headers: dict[str, str]) -> tuple[str, str]:
    """A new task answered :data:`TURNS` times: (task id, the SSE id of its first event)."""
    ids = await _started(http, url, headers)
    listed = (await http.post(url + "/", json=_rpc("ListTasks"), headers=headers)).json()
    task_id = listed["result"]["tasks"][0]["id"]
    for turn in range(TURNS):
        body = _rpc("SendMessage", message=_message(f"{turn}" + "x" * ANSWER, task_id))
        answer = (await http.post(url + "/", json=body, headers=headers)).json()
        assert find_key(answer, "state")[-1] == "TASK_STATE_INPUT_REQUIRED", answer
    return task_id, ids[0]


async def test_a_long_conversation_holds_its_bytes_bound_and_a_resume_past_it_is_told(
    agent: tuple[str, str, MemoryEventLog],
) -> None:
    url, grpc_address, log = agent
    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
        before = log.held_bytes
        task_id, first = await _task_of(http, url, A)
        held = log.held_bytes - before
        print(f"held: {held} bytes")
        # The task holds 41 messages of which 20 of 20 KB; the log, the bound and its
        # latest event (the whole task) at most (before: every event of the conversation).
        assert held <= BOUND + (TURNS + 1) * (ANSWER + 1000)
        got = (await http.post(url + "/", json=_rpc("GetTask", id=task_id), headers=A)).json()
        history = len(got["result"]["history"])
        for dialect in ("jsonrpc-1.0", "jsonrpc-0.3", "rest-1.0", "rest-0.3"):
            method, to, headers, body = _subscribe_call(dialect, url, task_id, first)
            answer = await http.request(method, to, headers={**A, **headers}, json=body)
            if dialect.startswith("rest"):
                assert answer.status_code == 400, answer.text
                assert "no longer kept" in answer.json()["error"]["message"], answer.text
            else:
                assert answer.status_code == 200, answer.text
                assert "-32602" in answer.text and "no longer kept" in answer.text, answer.text
    assert history == 2 * TURNS + 1
    # gRPC has no ids: its resume is a plain subscription, the task as it stands.
    async with grpc.aio.insecure_channel(grpc_address) as channel:
        new = a2a_pb2_grpc.A2AServiceStub(channel).SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(id=task_id),
            metadata=[("x-api-key", KEY_A), ("a2a-version", "1.0")],
        )
        old = a2a_v0_3_pb2_grpc.A2AServiceStub(channel).TaskSubscription(
            a2a_v0_3_pb2.TaskSubscriptionRequest(name=f"tasks/{task_id}"),
            metadata=[("x-api-key", KEY_A), ("a2a-version", "0.3")],
        )
        for call in (new, old):
            first_event = await call.read()  # the task waits for input: the stream goes on
            call.cancel()
            assert first_event.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
            assert len(first_event.task.history) == history


async def test_one_callers_huge_events_leave_anothers_parked_log(
    agent: tuple[str, str, MemoryEventLog],
) -> None:
    url, _grpc, _log = agent
    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
        parked = await _started(http, url, A)
        listed = (await http.post(url + "/", json=_rpc("ListTasks"), headers=A)).json()
        parked_id = listed["result"]["tasks"][0]["id"]
        for _ in range(3):
            await _task_of(http, url, B)
        method, to, headers, body = _subscribe_call("jsonrpc-1.0", url, parked_id, parked[0])
        replayed: list[str | None] = []
        async with (
            http.stream(method, to, headers={**A, **headers}, json=body) as answer,
            contextlib.aclosing(sse_frames(answer)) as frames,
        ):
            async for event_id, payload in frames:
                assert "error" not in payload, payload
                replayed.append(event_id)
                if len(replayed) == len(parked) - 1:
                    break  # the task waits for input: the stream goes on
    assert replayed == parked[1:], (replayed, parked)
