"""cancel_on_disconnect: off by default (clients may resubscribe); on, a dropped stream cancels,
on every binding: a gRPC stream its client cancels is dropped as an SSE stream whose client
hangs up (main: the task ran on)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2, a2a_v0_3_pb2_grpc
from a2a.types import GetTaskRequest, SubscribeToTaskRequest, TaskState, a2a_pb2, a2a_pb2_grpc
from google.protobuf.json_format import ParseDict

from .._support import TLS, free_port
from ..bindings._grpc import stubs
from ._agent import Agent, agent_server
from ._client import (
    V03,
    V1,
    collect,
    parts_data,
    rpc,
    sdk_client,
    sse_events,
    sse_post,
    summarize,
    wire_message,
    wire_message_03,
)

COUNT = {"count": 8, "delay": 0.1}
#: long enough that a dropped stream's cancel lands long before the module would end
SLOW = {"count": 50, "delay": 0.4}


def _shapes(count: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any], dict[str, str]]]:
    """(path, body, headers) of a streaming send in each wire shape the guard must
    understand, counting with *count*."""
    return {
        "jsonrpc-1.0": (
            "/",
            rpc("SendStreamingMessage", {"message": wire_message("life.count", count)}),
            V1,
        ),
        "jsonrpc-0.3": (
            "/",
            rpc("message/stream", {"message": wire_message_03("life.count", count)}),
            V03,
        ),
        "rest-1.0": ("/message:stream", {"message": wire_message("life.count", count)}, V1),
    }


SHAPES = _shapes(COUNT)
SLOW_SHAPES = _shapes(SLOW)


def _task_id(event: dict[str, Any]) -> str:
    result = event.get("result", event)
    return str(result["task"]["id"] if "task" in result else result["id"])


async def _drop_after(
    agent: Agent, shape: str, events: int, shapes: dict[str, Any] | None = None
) -> str:
    """Open a stream, read *events* events, then hang up; return the task id."""
    if shape == GRPC:
        return await _grpc_drop_after(agent, events, (shapes or SHAPES)["rest-1.0"][1])
    path, body, headers = (shapes or SHAPES)[shape]
    async with (
        httpx.AsyncClient(base_url=agent.url, verify=TLS) as http,
        http.stream("POST", path, json=body, headers=headers) as response,
    ):
        seen = []
        async for event in sse_events(response):
            seen.append(event)
            if len(seen) == events:
                break
    return _task_id(seen[0])


#: the gRPC 1.0 shape (cancel_on_disconnect needs its agent served with a gRPC port)
GRPC = "grpc-1.0"


def _grpc_address(agent: Agent) -> str:
    return f"127.0.0.1:{agent.state.settings.grpc_port}"


async def _grpc_drop_after(agent: Agent, events: int, body: dict[str, Any]) -> str:
    """:func:`_drop_after` on gRPC: the client cancels the call."""
    async with stubs(_grpc_address(agent)) as (v1, _v03):
        call = v1.SendStreamingMessage(ParseDict(body, a2a_pb2.SendMessageRequest()))
        seen = [await call.read() for _ in range(events)]
        call.cancel()
    first = seen[0]
    return str(first.task.id if first.HasField("task") else first.status_update.task_id)


async def _final_state(agent: Agent, task_id: str, timeout: float = 30.0) -> Any:
    client = await sdk_client(agent.url, streaming=False)
    try:
        from a2a.types import GetTaskRequest

        deadline = time.monotonic() + timeout
        while True:
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state in (
                TaskState.TASK_STATE_COMPLETED,
                TaskState.TASK_STATE_CANCELED,
                TaskState.TASK_STATE_FAILED,
            ):
                return task
            assert time.monotonic() < deadline, f"still {task.status.state}"
            await asyncio.sleep(0.02)
    finally:
        await client.close()


async def test_dropped_stream_keeps_running_by_default(agent: Agent) -> None:
    task_id = await _drop_after(agent, "jsonrpc-1.0", 3)
    task = await _final_state(agent, task_id)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [parts_data(a.parts) for a in task.artifacts] == [
        [{"n": n} for n in range(1, 9)] + [{"done": True}]
    ]


@pytest.mark.parametrize("shape", [*sorted(SHAPES), GRPC])
async def test_dropped_only_stream_cancels_when_enabled(
    caplog: pytest.LogCaptureFixture, shape: str
) -> None:
    async with agent_server(caplog, cancel_on_disconnect=True, grpc_port=free_port()) as agent:
        task_id = await _drop_after(agent, shape, 3, SLOW_SHAPES)
        task = await _final_state(agent, task_id)
        assert task.status.state == TaskState.TASK_STATE_CANCELED
        assert parts_data(task.status.message.parts) == ["Canceled by client"]
        assert agent.probe.done(task_id).is_set()
        assert agent.probe.token_seen_cancelled[task_id] is True


async def test_a_dropped_grpc_stream_of_a_caller_with_credentials_cancels_its_task(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The cancel of a dropped gRPC stream is built, after the stream, from what the
    interceptor admitted the call as: it is the stream's caller's own cancel (the task is
    found in that caller's tasks, not as an anonymous caller's)."""
    key = (("x-api-key", "key-a"),)
    settings = {"cancel_on_disconnect": True, "grpc_port": free_port(), "api_keys": ("key-a",)}
    async with agent_server(caplog, **settings) as agent:
        async with stubs(_grpc_address(agent)) as (v1, _v03):
            body = {"message": wire_message("life.count", SLOW)}
            request = ParseDict(body, a2a_pb2.SendMessageRequest())
            call = v1.SendStreamingMessage(request, metadata=key)
            first, *_ = [await call.read() for _ in range(3)]
            call.cancel()
            task_id = first.task.id if first.HasField("task") else first.status_update.task_id
            await _until(agent.probe.done(task_id).is_set, "the module was not stopped")
            deadline = time.monotonic() + 30  # a hang guard
            while True:
                task = await v1.GetTask(GetTaskRequest(id=task_id), metadata=key)
                if task.status.state != TaskState.TASK_STATE_WORKING:
                    break
                assert time.monotonic() < deadline, "the task is still working"
                await asyncio.sleep(0.02)
        assert task.status.state == TaskState.TASK_STATE_CANCELED
        assert parts_data(task.status.message.parts) == ["Canceled by client"]


async def test_stream_that_ends_normally_is_not_canceled(caplog: pytest.LogCaptureFixture) -> None:
    async with agent_server(caplog, cancel_on_disconnect=True) as agent:
        path, body, headers = SHAPES["jsonrpc-1.0"]
        async with (
            httpx.AsyncClient(base_url=agent.url, verify=TLS) as http,
            http.stream("POST", path, json=body, headers=headers) as response,
        ):
            events = [e async for e in sse_events(response)]
        assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        task = await _final_state(agent, _task_id(events[0]))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_dropped_grpc_stream_leaves_a_task_alone_that_sse_follows(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One count of a task's open streams for SSE and gRPC."""
    async with agent_server(caplog, cancel_on_disconnect=True, grpc_port=free_port()) as agent:
        follower = await sdk_client(agent.url)
        try:
            async with stubs(_grpc_address(agent)) as (v1, _v03):
                body = ParseDict(SHAPES["rest-1.0"][1], a2a_pb2.SendMessageRequest())
                call = v1.SendStreamingMessage(body)
                task_id = (await call.read()).task.id
                subscription = follower.subscribe(SubscribeToTaskRequest(id=task_id))
                attached = await anext(subscription)
                following = asyncio.create_task(collect(subscription))
                call.cancel()
            followed = [attached, *await asyncio.wait_for(following, 30)]
            assert summarize(followed[-1]) == ("status", "COMPLETED")
            task = await _final_state(agent, task_id)
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
        finally:
            await follower.close()


async def test_drop_leaves_task_alone_while_another_stream_follows_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with agent_server(caplog, cancel_on_disconnect=True) as agent:
        path, body, headers = SHAPES["jsonrpc-1.0"]
        follower = await sdk_client(agent.url)
        try:
            async with (
                httpx.AsyncClient(base_url=agent.url, verify=TLS) as http,
                http.stream("POST", path, json=body, headers=headers) as response,
            ):
                events = sse_events(response)
                task_id = _task_id(await events.__anext__())
                subscription = follower.subscribe(SubscribeToTaskRequest(id=task_id))
                # the follower is attached once it has the task's current snapshot
                attached = await anext(subscription)
                following = asyncio.create_task(collect(subscription))
            followed = [attached, *await asyncio.wait_for(following, 30)]
            assert summarize(followed[-1]) == ("status", "COMPLETED")
            task = await _final_state(agent, task_id)
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
        finally:
            await follower.close()


#: a message-reply skill's stream sends nothing while its module runs (life.ponder)
#: the JSON of 0.3's protobuf, as REST 0.3 reads it
_PONDER_03 = {
    "messageId": "m-1",
    "role": "ROLE_USER",
    "content": [{"data": {"data": {}}}],
    "metadata": {"skillId": "life.ponder"},
}
PONDER_SHAPES = {
    "jsonrpc-1.0": ("/", rpc("SendStreamingMessage", {"message": wire_message("life.ponder", {})})),
    "rest-1.0": ("/message:stream", {"message": wire_message("life.ponder", {})}),
    # 0.3's JSON-RPC route answers its status line and headers at once, before any frame
    "jsonrpc-0.3": ("/", rpc("message/stream", {"message": wire_message_03("life.ponder", {})})),
    "rest-0.3": ("/v1/message:stream", {"message": _PONDER_03}),
}


async def _hang_up_before_answer(agent: Agent, shape: str) -> str:
    """Send a ``life.ponder`` stream on a raw socket and close it while the module runs,
    before the server answered a frame (1.0: not even the status line); return the run's
    id."""
    path, body = PONDER_SHAPES[shape]
    version = shape.rsplit("-", 1)[1]
    host, port = agent.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"A2A-Version: {version}\r\ncontent-length: {len(data)}\r\n\r\n"
    )
    writer.write(head.encode() + data)
    await writer.drain()
    deadline = time.monotonic() + 30
    while not agent.probe.contexts:  # the module runs: the answer waits for its result
        assert time.monotonic() < deadline, "the module never ran"
        await asyncio.sleep(0.01)
    assert not reader.at_eof()  # the gate is shut: nothing was answered yet
    writer.close()
    await writer.wait_closed()
    return str(agent.probe.contexts[0]["task_id"])


async def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 30  # a hang guard
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


async def _listed(agent: Agent) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=agent.url, verify=TLS) as http:
        answer = await http.post("/", json=rpc("ListTasks", {}), headers=V1)
    return list(answer.json()["result"]["tasks"])


@pytest.mark.parametrize("shape", sorted(PONDER_SHAPES))
async def test_hang_up_before_the_first_frame_stops_the_run_when_enabled(
    caplog: pytest.LogCaptureFixture, shape: str
) -> None:
    async with agent_server(caplog, cancel_on_disconnect=True) as agent:
        run_id = await _hang_up_before_answer(agent, shape)
        await _until(agent.probe.done(run_id).is_set, "the module was not stopped")
        assert agent.probe.token_seen_cancelled[run_id] is True
        await _until(lambda: agent.state.streams.active == 0, "the stream slot is still held")
        assert await _listed(agent) == []  # nothing answered, nothing recorded


async def test_a_grpc_call_canceled_before_its_first_item_stops_the_run_when_enabled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with agent_server(caplog, cancel_on_disconnect=True, grpc_port=free_port()) as agent:
        async with stubs(_grpc_address(agent)) as (v1, _v03):
            body = {"message": wire_message("life.ponder", {})}
            call = v1.SendStreamingMessage(ParseDict(body, a2a_pb2.SendMessageRequest()))
            await _until(lambda: agent.probe.contexts, "the module never ran")
            run_id = str(agent.probe.contexts[0]["task_id"])
            call.cancel()
        await _until(agent.probe.done(run_id).is_set, "the module was not stopped")
        assert agent.probe.token_seen_cancelled[run_id] is True
        await _until(lambda: agent.state.streams.active == 0, "the stream slot is still held")
        assert await _listed(agent) == []  # nothing answered, nothing recorded


async def test_hang_up_before_the_first_frame_frees_the_slot_by_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with agent_server(caplog, max_streams=1) as agent:
        run_id = await _hang_up_before_answer(agent, "jsonrpc-1.0")
        # The run goes on (a dropped stream does by default), but the stream is gone.
        await _until(lambda: agent.state.streams.active == 0, "the stream slot is still held")
        assert not agent.probe.done(run_id).is_set()
        agent.probe.gate.set()
        await _until(agent.probe.done(run_id).is_set, "the module did not finish")
        assert agent.probe.token_seen_cancelled[run_id] is False


async def test_hang_up_before_the_first_frame_gives_the_caller_its_stream_quota_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with agent_server(caplog, max_streams_per_caller=1) as agent:
        run_id = await _hang_up_before_answer(agent, "jsonrpc-1.0")
        await _until(lambda: agent.state.streams.active == 0, "the stream slot is still held")
        # The same caller (ip:127.0.0.1) streams again: its one slot was given back.
        body = rpc("SendStreamingMessage", {"message": wire_message("life.echo", {"text": "x"})})
        async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:
            response, events = await sse_post(http, "/", body)
        assert response.status_code == 200
        assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        agent.probe.gate.set()
        await _until(agent.probe.done(run_id).is_set, "the module did not finish")


#: four 1 MiB chunks at once: far past the 64 KiB a stream may send unread (no BDP probe)
FLOOD = {"chunks": 4, "size": 1 << 20}


def _flood_request(version: str) -> Any:
    if version == "1.0":
        body = {"message": wire_message("life.flood", FLOOD)}
        return ParseDict(body, a2a_pb2.SendMessageRequest())
    content = [{"data": {"data": FLOOD}}]  # 0.3's protobuf: DataPart{data}
    message = {"messageId": "m-1", "role": "ROLE_USER", "content": content}
    message["metadata"] = {"skillId": "life.flood"}
    return ParseDict({"request": message}, a2a_v0_3_pb2.SendMessageRequest())


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_a_grpc_stream_canceled_while_an_item_waits_to_be_sent_cancels_its_task(
    caplog: pytest.LogCaptureFixture, version: str
) -> None:
    """The client reads one item and stops: the agent's next item waits on flow control,
    in grpc.aio's send, not in our stream's await. A cancel landing there is a drop too
    (main: the stream ended unnoticed, and the task ran on, to COMPLETED)."""
    async with agent_server(caplog, cancel_on_disconnect=True, grpc_port=free_port()) as agent:
        try:
            # Without BDP probing the stream's window stays at HTTP/2's 64 KiB.
            options = [("grpc.http2.bdp_probe", 0)]
            async with grpc.aio.insecure_channel(_grpc_address(agent), options=options) as channel:
                stub: Any = (
                    a2a_pb2_grpc.A2AServiceStub(channel)
                    if version == "1.0"
                    else a2a_v0_3_pb2_grpc.A2AServiceStub(channel)
                )
                metadata = (("a2a-version", version),)
                call = stub.SendStreamingMessage(_flood_request(version), metadata=metadata)
                first = await call.read()
                task_id = first.task.id
                flooded = agent.probe.done(f"{task_id}:flooded")
                await _until(flooded.is_set, "the module did not stream its chunks")
                call.cancel()
            await _until(agent.probe.done(task_id).is_set, "the module was not stopped")
        finally:
            agent.probe.gate.set()  # a run left going ends before the agent stops
        assert agent.probe.token_seen_cancelled[task_id] is True
        task = await _final_state(agent, task_id)
        assert task.status.state == TaskState.TASK_STATE_CANCELED


#: the deadline of a gRPC stream whose module waits for the gate (a hang guard for the
#: first item of ``life.stall``, not a speed check)
DEADLINE = 3.0


async def test_a_grpc_stream_whose_deadline_passes_after_its_first_item_cancels_its_task(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with agent_server(caplog, cancel_on_disconnect=True, grpc_port=free_port()) as agent:
        async with stubs(_grpc_address(agent)) as (v1, _v03):
            body = {"message": wire_message("life.stall", {})}
            request = ParseDict(body, a2a_pb2.SendMessageRequest())
            call = v1.SendStreamingMessage(request, timeout=DEADLINE)
            task_id = (await call.read()).task.id
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                async for _item in call:
                    pass
            assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        await _until(agent.probe.done(task_id).is_set, "the module was not stopped")
        assert agent.probe.token_seen_cancelled[task_id] is True
        task = await _final_state(agent, task_id)
        assert task.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_grpc_stream_whose_deadline_passes_before_its_first_item_stops_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with agent_server(caplog, cancel_on_disconnect=True, grpc_port=free_port()) as agent:
        async with stubs(_grpc_address(agent)) as (v1, _v03):
            body = {"message": wire_message("life.ponder", {})}
            request = ParseDict(body, a2a_pb2.SendMessageRequest())
            call = v1.SendStreamingMessage(request, timeout=DEADLINE)
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await call.read()
            assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        run_id = str(agent.probe.contexts[0]["task_id"])
        await _until(agent.probe.done(run_id).is_set, "the module was not stopped")
        assert agent.probe.token_seen_cancelled[run_id] is True
        await _until(lambda: agent.state.streams.active == 0, "the stream slot is still held")
        assert await _listed(agent) == []  # nothing answered, nothing recorded
