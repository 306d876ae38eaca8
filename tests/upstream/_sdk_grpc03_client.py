"""Run as a script in a fresh interpreter: ``python _sdk_grpc03_client.py PORT STATEMENT``.

Runs *STATEMENT* (the imports under test), then asks a2a-sdk's own ``ClientFactory`` for a
client of an agent whose card declares only a gRPC 0.3 interface, sends one message to a
gRPC server on 127.0.0.1:*PORT* that records the method called (and answers
``UNIMPLEMENTED``), and prints the methods called as JSON. A 0.3 client calls
``/a2a.v1.A2AService/...``, a 1.0 client ``/lf.a2a.v1.A2AService/...``.
"""

from __future__ import annotations

import asyncio
import json
import sys

exec(sys.argv[2])  # the imports under test come first

import grpc  # noqa: E402
import grpc.aio  # noqa: E402
from a2a.client import ClientConfig, ClientFactory  # noqa: E402
from a2a.types import (  # noqa: E402
    AgentCard,
    AgentInterface,
    Message,
    Part,
    Role,
    SendMessageRequest,
)

SEEN: list[str] = []


class Record(grpc.GenericRpcHandler):
    def service(self, handler_call_details: grpc.HandlerCallDetails) -> None:
        SEEN.append(handler_call_details.method)  # type: ignore[attr-defined]


async def main(port: int) -> None:
    server = grpc.aio.server(handlers=[Record()])
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    interface = AgentInterface(
        url=f"127.0.0.1:{port}", protocol_binding="GRPC", protocol_version="0.3"
    )
    config = ClientConfig(
        supported_protocol_bindings=["GRPC"], grpc_channel_factory=grpc.aio.insecure_channel
    )
    client = ClientFactory(config).create(AgentCard(name="peer", supported_interfaces=[interface]))
    message = Message(role=Role.ROLE_USER, message_id="m-1", parts=[Part(text="hi")])
    try:
        async for _ in client.send_message(SendMessageRequest(message=message)):
            pass
    except Exception:  # UNIMPLEMENTED: only the method called matters
        pass
    await server.stop(None)
    print(json.dumps(SEEN))


asyncio.run(main(int(sys.argv[1])))
