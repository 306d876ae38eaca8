"""A client process for the tests that kill it: a raw ``grpc.aio`` client opens *count*
``grpc.health.v1.Health/Watch`` streams and *count* reflection ``ServerReflectionInfo``
streams to *target*, reads each one's first answer, asks each reflection stream for more
than a stream may send unread (so the agent waits in its send), prints ``open``, and then
reads nothing more until it is killed.

Run as ``python _grpc_watch_client.py HOST:PORT COUNT``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

#: answered with its file and their imports: about 33 KiB an answer
SYMBOL = "lf.a2a.v1.A2AService"
#: answers asked for on each reflection stream, about 2 MiB: past its 64 KiB window
FLOOD = 64


async def main(target: str, count: int) -> None:
    channel = grpc.aio.insecure_channel(target)
    health = health_pb2_grpc.HealthStub(channel)
    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    calls: list[Any] = []
    for _ in range(count):
        watch = health.Watch(health_pb2.HealthCheckRequest())
        await watch.read()
        calls.append(watch)
        info = reflection.ServerReflectionInfo()
        await info.write(reflection_pb2.ServerReflectionRequest(list_services=""))
        await info.read()
        for _ in range(FLOOD):  # unread answers past the stream's window
            await info.write(reflection_pb2.ServerReflectionRequest(file_containing_symbol=SYMBOL))
        calls.append(info)
    print("open", flush=True)
    await asyncio.Event().wait()  # killed here


if __name__ == "__main__":
    target, count = sys.argv[1:3]
    asyncio.run(main(target, int(count)))
