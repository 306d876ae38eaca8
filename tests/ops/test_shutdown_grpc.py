"""gRPC streams at a stop, with the official a2a-sdk client as the peer: a stream gets its
task's last event, then its normal end, as an SSE stream does
(``tests/ops/test_shutdown_streams.py``)."""

from __future__ import annotations

import asyncio
import signal
import struct
import subprocess
from typing import Any

import pytest
from a2a.types import SubscribeToTaskRequest, TaskState

from apcore_a2a.ops.shutdown import SHUTDOWN_MESSAGE

from .._h2raw import DATA, PREFACE, SETTINGS, Peer, frame, message
from .._sdk import make_client, request
from .._support import free_port
from ._proc import collect_events, serve_process

#: How long a test waits for the server to act: a hang guard only.
GUARD = 60.0


async def test_a_grpc_stream_gets_its_canceled_event_then_ends() -> None:
    events: list[Any] = []
    first = asyncio.Event()
    with serve_process(grpc_port=free_port(), shutdown_timeout=1) as (url, proc):
        client = await make_client(url, "GRPC", "1.0", streaming=True)
        stream = client.send_message(request("ops.sleep", {"seconds": 60}))
        reading = asyncio.ensure_future(collect_events(stream, events, first))
        async with asyncio.timeout(30):
            while not any(getattr(e, "status_update", None) for e in events if e):
                await asyncio.sleep(0.02)  # the module runs
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(reading, 60)  # a hang guard: the stream must end
        code = await asyncio.to_thread(proc.wait, 60)
        out = proc.output()
    assert code == 0, out
    assert "Traceback" not in out, out
    assert not isinstance(events[-1], Exception), (events[-1], out)
    last = events[-1].status_update.status
    assert last.state == TaskState.TASK_STATE_CANCELED, events[-1]
    assert last.message.parts[0].text == SHUTDOWN_MESSAGE


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_a_grpc_subscription_the_drain_does_not_end_ends_after_it(version: str) -> None:
    """A ``SubscribeToTask`` of a task parked in ``input-required`` gets no final event
    from the drain. grpc's stop held it until its grace ran out (``shutdown_timeout`` + 5 s
    into the stop), then the client read ``UNAVAILABLE`` "Cancelling all calls"; it now
    ends as its SSE form does, once the drain has ended: status OK."""
    events: list[Any] = []
    first = asyncio.Event()
    with serve_process(grpc_port=free_port(), shutdown_timeout=1) as (url, proc):
        client = await make_client(url, "GRPC", version, streaming=True)
        parked = None
        async for event in client.send_message(request("ops.talk", {"text": "hi"})):
            parked = event
        assert parked is not None
        task_id = parked.task.id or parked.status_update.task_id
        stream = client.subscribe(SubscribeToTaskRequest(id=task_id))
        reading = asyncio.ensure_future(collect_events(stream, events, first))
        await asyncio.wait_for(first.wait(), 30)  # the task as it stands: the stream is open
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(reading, 60)
        code = await asyncio.to_thread(proc.wait, 60)
        out = proc.output()
    assert code == 0, out
    assert "Traceback" not in out, out
    assert not isinstance(events[-1], Exception), (events[-1], out)
    [snapshot] = events  # the task as it stood, then the stream's normal end
    assert snapshot.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, snapshot


async def test_health_watch_and_reflection_streams_end_after_the_drain() -> None:
    """A ``Health.Watch`` stream (kept open by balancers and probes) reads ``NOT_SERVING``
    at the stop, then ends with status OK; a reflection stream ends with OK too. Both were
    held by grpc's stop until its grace ran out, then cut ``UNAVAILABLE`` "Cancelling all
    calls", holding the whole stop that long."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    port = free_port()
    with serve_process(grpc_port=port, shutdown_timeout=1, grpc_reflection=True) as (_, proc):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
            statuses = [(await watch.read()).status]
            asked: asyncio.Queue[Any] = asyncio.Queue()
            await asked.put(reflection_pb2.ServerReflectionRequest(list_services=""))

            async def requests() -> Any:
                while (item := await asked.get()) is not None:
                    yield item

            reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
            info = reflection.ServerReflectionInfo(requests())
            assert (await info.read()).list_services_response.service, "reflection answers"
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(60):  # a hang guard: both streams must end
                while (item := await watch.read()) is not grpc.aio.EOF:
                    statuses.append(item.status)
                watch_code, watch_details = await watch.code(), await watch.details()
                while await info.read() is not grpc.aio.EOF:
                    pass
                info_code, info_details = await info.code(), await info.details()
            code = await asyncio.to_thread(proc.wait, 60)
            out = proc.output()
    assert code == 0, out
    assert "Traceback" not in out, out
    serving = health_pb2.HealthCheckResponse
    assert statuses == [serving.SERVING, serving.NOT_SERVING], statuses
    assert watch_code == grpc.StatusCode.OK, (watch_code, watch_details)
    assert info_code == grpc.StatusCode.OK, (info_code, info_details)


@pytest.mark.parametrize("call", ["watch", "reflection", "a2a"])
async def test_a_stream_whose_client_does_not_read_holds_no_stop(call: str) -> None:
    """A client that opened ``Health.Watch``, a reflection stream or an A2A stream (of a
    task that parks in ``input-required``) and reads nothing (its HTTP/2 window is 0: no
    byte of an answer can go): the stop's last write to it cannot go either. grpc's stop
    waited for the call until its grace ran out (``shutdown_timeout`` + 5 s, here 10
    minutes); it is now cut soon after the drain has ended, and the process exits 0 with
    no traceback (the guard below only ends a wait)."""
    from grpc_reflection.v1alpha import reflection_pb2

    port = free_port()
    path, body, ends = {
        "watch": ("/grpc.health.v1.Health/Watch", b"", True),
        "reflection": (
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString(),
            False,
        ),
        "a2a": (
            "/lf.a2a.v1.A2AService/SendStreamingMessage",
            request("ops.talk", {"text": "hi"}).SerializeToString(),
            True,
        ),
    }[call]
    with serve_process(grpc_port=port, shutdown_timeout=600, grpc_reflection=True) as (_, proc):
        peer = await Peer.open("127.0.0.1", port)
        try:  # SETTINGS_INITIAL_WINDOW_SIZE 0: the server may send no DATA on a stream
            peer.send(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", 0x4, 0)))
            peer.talking = True
            peer.start_call(1, f"127.0.0.1:{port}", path)
            if ends:
                peer.finish_call(1, message(body))
            else:
                peer.send(frame(DATA, 0, 1, message(body)))
            async with asyncio.timeout(GUARD):  # the call has begun (its answer's headers)
                while 1 not in peer.seen.headers:
                    await asyncio.sleep(0.02)
            proc.send_signal(signal.SIGTERM)
            try:
                code = await asyncio.to_thread(proc.wait, GUARD)
            except subprocess.TimeoutExpired:
                proc.kill()  # held by the call: serve_process fails the test with its output
                raise
        finally:
            await peer.close()
        out = proc.output()
    assert code == 0, out
    assert "Traceback" not in out, out
