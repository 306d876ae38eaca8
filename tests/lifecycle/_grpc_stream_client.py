"""A client process for the tests that kill it: the official a2a-sdk client opens
*count* gRPC streams of ``life.flood`` to the agent at *url*, reads each one's first
event, prints its task id (one a line), and then reads nothing more until it is killed.

Run as ``python _grpc_stream_client.py URL COUNT CHUNKS SIZE[,SIZE...]``: stream *i*
floods *CHUNKS* chunks of the *i*-th size (round robin). Without BDP probing a stream's
window stays at HTTP/2's 64 KiB: items past it wait to be sent.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any

import grpc
import grpc.aio
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest
from google.protobuf.struct_pb2 import Struct


def _flood(chunks: int, size: int) -> SendMessageRequest:
    part = Part()
    data = Struct()
    data.update({"chunks": chunks, "size": size})
    part.data.struct_value.CopyFrom(data)
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[part])
    message.metadata.update({"skillId": "life.flood"})
    return SendMessageRequest(message=message)


def _channel(target: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(target, options=[("grpc.http2.bdp_probe", 0)])


async def main(url: str, count: int, chunks: int, sizes: list[int]) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
    grpc_only = [i for i in card.supported_interfaces if i.protocol_binding == "GRPC"]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(i for i in grpc_only if i.protocol_version == "1.0")
    config = ClientConfig(
        streaming=True, supported_protocol_bindings=["GRPC"], grpc_channel_factory=_channel
    )
    client = ClientFactory(config).create(card)
    streams: list[Any] = [
        client.send_message(_flood(chunks, sizes[n % len(sizes)])) for n in range(count)
    ]
    for stream in streams:
        first = await anext(stream)
        print(first.task.id, flush=True)
    await asyncio.Event().wait()  # killed here


if __name__ == "__main__":
    url, count, chunks, sizes = sys.argv[1:5]
    asyncio.run(main(url, int(count), int(chunks), [int(s) for s in sizes.split(",")]))
