"""A plain a2a-sdk agent assembled from SDK classes only (none of our server code).

It is the independent peer the client scenario suite runs against. The executor's
behaviour is chosen by the first text part of the user message:

* ``slow``         works until canceled (the cancel scenario)
* ``ask``          asks for input; the follow-up completes the task with ``got: <text>``
* ``message-only`` answers with a bare Message instead of a Task
* ``boom``         raises a plain exception (the SDK reports -32603)
* ``bad-agent``    sends a status update before the Task (the SDK reports -32006)
* ``reject-params`` raises the SDK's InvalidParamsError (-32602)
* anything else    completes with an artifact ``echo: <text>``

A data part is echoed back as a data part ``{"echo": <data>}``; a file part is echoed
back unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryPushNotificationConfigStore, InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    InvalidParamsError,
    Message,
    Part,
    Role,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette


def _first_text(message: Message | None) -> str:
    if message is None:
        return ""
    for part in message.parts:
        if part.WhichOneof("content") == "text":
            return part.text
    return ""


class EchoExecutor(AgentExecutor):
    """Echo agent with a few scripted behaviours (see the module docstring)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        text = _first_text(message)
        task_id, context_id = context.task_id or "", context.context_id or ""
        if text == "message-only":
            reply = Message(
                role=Role.ROLE_AGENT,
                message_id=f"reply-{message.message_id}",
                context_id=context_id,
                parts=[Part(text="just a message")],
            )
            await event_queue.enqueue_event(reply)
            return
        if text == "bad-agent":
            await event_queue.enqueue_event(
                TaskStatusUpdateEvent(
                    task_id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
                )
            )
            return
        if text == "boom":
            raise RuntimeError("kaboom")
        if text == "reject-params":
            raise InvalidParamsError(message="the agent rejected the parameters")

        updater = TaskUpdater(event_queue, task_id, context_id)
        resumed = context.current_task is not None
        if not resumed:
            await event_queue.enqueue_event(new_task_from_user_message(message))
        await updater.start_work()
        if text == "slow":
            await asyncio.sleep(30)
            await updater.complete()
            return
        if text == "ask" and not resumed:
            await updater.requires_input(
                updater.new_agent_message([Part(text="what is your name?")])
            )
            return
        parts = []
        for part in message.parts:
            kind = part.WhichOneof("content")
            if kind == "text":
                prefix = "got: " if resumed else "echo: "
                parts.append(Part(text=prefix + part.text))
            elif kind == "data":
                echoed = Part()
                echoed.data.struct_value.update({"echo": MessageToDict(part.data)})
                parts.append(echoed)
            else:
                parts.append(part)
        await updater.add_artifact(parts, name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def agent_card(
    base_url: str,
    *,
    versions: tuple[str, ...] = ("1.0", "0.3"),
    streaming: bool = True,
    push: bool = True,
    input_modes: tuple[str, ...] = ("text/plain", "application/json"),
    binding: str = "JSONRPC",
) -> AgentCard:
    """The card: *binding*'s interfaces (a gRPC one names *base_url* as ``host:port``)."""
    return AgentCard(
        name="SDK echo agent",
        description="Plain a2a-sdk agent used as the client's test peer",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=base_url, protocol_binding=binding, protocol_version=v)
            for v in versions
        ],
        capabilities=AgentCapabilities(
            streaming=streaming, push_notifications=push, extended_agent_card=True
        ),
        default_input_modes=list(input_modes),
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id="echo", name="Echo", description="Echoes its input", tags=["test"])],
    )


def build_sdk_app(
    base_url: str,
    *,
    versions: tuple[str, ...] = ("1.0", "0.3"),
    streaming: bool = True,
    push: bool = True,
    validate_input_modes: bool = False,
    legacy_card_only: bool = False,
    executor: EchoExecutor | None = None,
    binding: str = "JSONRPC",
) -> Starlette:
    """An A2A agent made of SDK parts: card + JSON-RPC (1.0 and 0.3) + REST routes; its
    card offers *binding* (JSON-RPC or HTTP+JSON)."""
    card = agent_card(base_url, versions=versions, streaming=streaming, push=push, binding=binding)
    handler = DefaultRequestHandler(
        agent_executor=executor or EchoExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=InMemoryPushNotificationConfigStore() if push else None,
        validate_input_modes=validate_input_modes,
    )
    card_path = "/.well-known/agent.json" if legacy_card_only else "/.well-known/agent-card.json"

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()

    # Card and JSON-RPC routes first: the REST tenant Mount would swallow them.
    routes: list[Any] = [
        *create_agent_card_routes(card, card_url=card_path),
        *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True),
        *create_rest_routes(handler, enable_v0_3_compat=True),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
