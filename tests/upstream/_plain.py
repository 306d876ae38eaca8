"""A plain a2a-sdk agent (SDK parts only) served over JSON-RPC, REST and gRPC.

The tests of the seam watch upstream behaviour on it: what the SDK does alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    a2a_pb2_grpc,
)
from starlette.applications import Starlette

from tests._support import free_port
from tests.client._sdk_agent import EchoExecutor, agent_card


def plain_agent(
    *, compat: bool = False, extended: bool = True, executor: AgentExecutor | None = None
) -> tuple[Starlette, int]:
    """A plain a2a-sdk agent (no push support) and the gRPC port its lifespan serves (the
    1.0 and the 0.3 service); with
    *compat*, A2A 0.3 on JSON-RPC and REST too; *extended*: its card's
    ``capabilities.extended_agent_card`` (none is configured); *executor*: the SDK agent's
    (the echo agent's by default)."""
    base = "http://127.0.0.1"
    card = agent_card(base, push=False)
    card.capabilities.extended_agent_card = extended
    handler = DefaultRequestHandler(
        agent_executor=executor or EchoExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    grpc_port = free_port()

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        server = grpc.aio.server()
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)  # type: ignore[no-untyped-call]
        v03 = CompatGrpcHandler(handler)
        a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(v03, server)  # type: ignore[no-untyped-call]
        server.add_insecure_port(f"127.0.0.1:{grpc_port}")
        await server.start()
        yield
        await server.stop(0)
        await handler.aclose()

    routes = [
        *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=compat),
        *create_rest_routes(handler, enable_v0_3_compat=compat),
    ]
    return Starlette(routes=routes, lifespan=lifespan), grpc_port


class WorksUntilCanceled(AgentExecutor):
    """Says it works, then waits; a cancel ends it in *end* (``COMPLETED``: its result was
    on its way as the cancel reached it)."""

    def __init__(self, end: TaskState = TaskState.TASK_STATE_CANCELED) -> None:
        self.end = end

    async def execute(self, context: Any, event_queue: Any) -> None:
        state = TaskState.TASK_STATE_WORKING
        task = new_task(context.task_id, context.context_id, state, history=[context.message])
        await event_queue.enqueue_event(task)
        await asyncio.Event().wait()

    async def cancel(self, context: Any, event_queue: Any) -> None:
        status = TaskStatus(state=self.end)
        await event_queue.enqueue_event(
            TaskStatusUpdateEvent(
                task_id=context.task_id, context_id=context.context_id, status=status
            )
        )


def plain_handler(executor: AgentExecutor) -> DefaultRequestHandler:
    """A plain ``DefaultRequestHandler`` on an in-memory store."""
    card = agent_card("http://x")
    return DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
    )


async def start_working(handler: DefaultRequestHandler) -> str:
    """The id of a task *handler* runs now (sent with ``return_immediately``)."""
    message = Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="go")])
    request = SendMessageRequest(message=message)
    request.configuration.return_immediately = True
    task = await handler.on_message_send(request, ServerCallContext())
    return str(task.id)
