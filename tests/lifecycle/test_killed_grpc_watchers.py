"""Stream slots of the services beside A2A (``Health.Watch``, reflection's
``ServerReflectionInfo``) when their client's process dies: each is given back inside its
call, so a new client of the same caller gets its streams at once.

The client (``_grpc_watch_client.py``, a raw grpc.aio one) holds every slot of its caller:
half ``Watch`` streams, half reflection streams flooded past what a stream may send
unread, so the agent waits in its send of a reflection answer when the client is SIGKILLed.
A stream whose generator grpc.aio abandons there is closed only when Python collects it:
CPython's reference counting does that at once, so the test keeps every generator that
Python would collect (an async generator finalizer that keeps them, as a collector that has
not run yet would), and a slot given back only by collection stays held.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from .._support import free_port
from ._agent import agent_server

#: Watch streams, and as many reflection streams: every slot of the caller
STREAMS = 4
CLIENT = Path(__file__).with_name("_grpc_watch_client.py")
#: a hang guard, not a speed check
GUARD = 60.0


@contextlib.asynccontextmanager
async def uncollected() -> AsyncIterator[None]:
    """Keep every async generator Python would collect until the block ends (then close
    them)."""
    kept: list[AsyncGenerator[Any, None]] = []
    hooks = sys.get_asyncgen_hooks()
    sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=kept.append)
    try:
        yield
    finally:
        sys.set_asyncgen_hooks(*hooks)
        for generator in kept:
            await generator.aclose()


async def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


async def _killed_client(target: str) -> None:
    """Run the client process until its streams are open, then SIGKILL it."""
    args = [str(CLIENT), target, str(STREAMS)]
    child = await asyncio.create_subprocess_exec(
        sys.executable, *args, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), GUARD)
        assert line == b"open\n", f"the client exited ({await child.wait()}) before its streams"
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()


async def _opened(target: str) -> list[str]:
    """Open every stream of the caller again over a new channel: the code each one got."""
    codes = []
    async with grpc.aio.insecure_channel(target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        calls: list[Any] = []
        for _ in range(STREAMS):
            calls.append(health.Watch(health_pb2.HealthCheckRequest()))
            info = reflection.ServerReflectionInfo()
            await info.write(reflection_pb2.ServerReflectionRequest(list_services=""))
            calls.append(info)
        for call in calls:
            try:
                await call.read()
                codes.append("OK")
            except grpc.aio.AioRpcError as exc:
                codes.append(exc.code().name)
            call.cancel()
    return codes


async def test_a_killed_clients_watch_and_reflection_slots_are_back_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    target = f"127.0.0.1:{port}"
    settings = {"grpc_port": port, "grpc_reflection": True}
    async with (
        uncollected(),
        agent_server(caplog, max_streams_per_caller=2 * STREAMS, **settings) as agent,
    ):
        streams = agent.state.streams
        await _killed_client(target)
        # The server has seen the connection end: its Watch streams (coroutines, which
        # grpc.aio cancels) gave their slots back.
        await _until(lambda: streams.active <= STREAMS, "the killed client's end was not seen")
        assert await _opened(target) == ["OK"] * (2 * STREAMS)
        await _until(lambda: streams.active == 0, "a stream slot is still held")
