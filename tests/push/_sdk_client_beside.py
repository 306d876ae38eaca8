"""Run as a script in a fresh interpreter (``python -m tests.push._sdk_client_beside``):
an agent with push and gRPC on, served in this process, and a2a-sdk's own ``ClientFactory``
client in the same process, pinned to the agent's gRPC 0.3 interface, sending a message
that registers a webhook. The agent is imported first, as an application that serves it
before it first imports ``a2a.client``. Prints the top-level keys of each delivery as JSON
lines.
"""

from __future__ import annotations

from apcore_a2a import A2AServerFactory  # noqa: F401  (first: the subject is import order)

# isort: split
import asyncio
import json

import grpc.aio
from a2a.client import ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    AgentInterface,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
)

from tests._support import free_port
from tests.push._agent import push_agent, receiver


def _request(webhook: str) -> SendMessageRequest:
    part = Part()
    part.data.struct_value.update({"a": 2, "b": 3})
    message = Message(role=Role.ROLE_USER, message_id="m-1", parts=[part])
    message.metadata.update({"skillId": "demo.add"})
    push = TaskPushNotificationConfig(url=webhook)
    configuration = SendMessageConfiguration(task_push_notification_config=push)
    return SendMessageRequest(message=message, configuration=configuration)


async def main() -> None:
    grpc_port = free_port()
    async with receiver() as rec, push_agent(grpc_port=grpc_port) as (_base, app):
        interface = AgentInterface(
            url=f"127.0.0.1:{grpc_port}", protocol_binding="GRPC", protocol_version="0.3"
        )
        config = ClientConfig(
            supported_protocol_bindings=["GRPC"], grpc_channel_factory=grpc.aio.insecure_channel
        )
        client = ClientFactory(config).create(
            AgentCard(name="agent", supported_interfaces=[interface])
        )
        async for _ in client.send_message(_request(rec.url("/hook"))):
            pass
        await rec.wait_for(lambda: any(b"COMPLETED" in d.body.upper() for d in rec.log))
        await app.state.a2a.extras["push"].sender.idle()
        for delivery in rec.accepted("/hook"):
            print(json.dumps(sorted(json.loads(delivery.body))))


asyncio.run(main())
