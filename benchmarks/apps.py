"""The systems under test: S (plain a2a-sdk echo server), O (our server), F (S whose executor
calls the echo module through apcore's ``Executor.call_async``: the floor of any adapter that
runs modules through apcore, as ours must) and the echo module.

Both servers answer the same wire requests with the same event sequence: a submitted Task
carrying the user message, working, one artifact with the echoed text, then completed. S is
assembled only from SDK classes, the way an SDK user would write it; O is
``A2AServerFactory(registry).create()``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

ECHO_MODULE_ID = "bench.echo"


class EchoInput(BaseModel):
    text: str


class EchoOutput(BaseModel):
    text: str


class EchoModule:
    """Trivial apcore module: returns its input text. Async so R measures no thread hop."""

    input_schema = EchoInput
    output_schema = EchoOutput
    description = "Echo the given text back."
    tags = ["bench"]

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"text": inputs["text"]}


def echo_registry() -> Any:
    """An apcore Registry holding only the echo module (the same for O and R)."""
    from apcore import Registry

    registry = Registry()
    registry.register(ECHO_MODULE_ID, EchoModule())
    return registry


def sdk_task_store(url: str) -> Any:
    """The SDK's ``DatabaseTaskStore`` for one of our store URLs, as an SDK user builds it.

    ``sqlite:///path`` becomes an aiosqlite engine; ``postgresql://...?schema=NAME`` an
    asyncpg engine whose connections use that schema (``search_path``), the way the SDK's
    docs leave schema choice to the engine.
    """
    from urllib.parse import parse_qs, urlsplit, urlunsplit

    from a2a.server.tasks import DatabaseTaskStore
    from sqlalchemy.ext.asyncio import create_async_engine

    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        return DatabaseTaskStore(create_async_engine("sqlite+aiosqlite:" + url[len("sqlite:") :]))
    if parts.scheme in ("postgresql", "postgres"):
        schema = parse_qs(parts.query).get("schema", ["public"])[0]
        bare = urlunsplit(("postgresql+asyncpg", parts.netloc, parts.path, "", ""))
        engine = create_async_engine(
            bare, connect_args={"server_settings": {"search_path": schema}}
        )
        return DatabaseTaskStore(engine)
    raise ValueError(f"no SDK task store for {url!r}")


def plain_app(
    task_store: str = "memory://", *, through_apcore: bool = False, cached: bool = False
) -> Any:
    """S: a plain a2a-sdk 1.x echo server built from SDK classes only.

    *task_store* ``memory://`` is the SDK's ``InMemoryTaskStore``; a SQLite or PostgreSQL
    URL is the SDK's ``DatabaseTaskStore`` on that database (:func:`sdk_task_store`).
    *through_apcore* (F): the echoed text comes from the echo module, called through a
    plain ``apcore.Executor`` (apcore's defaults; nothing of ours) instead of the request;
    *cached*: that executor with :func:`apcore_a2a.cache_schemas`, the one apcore speed-up
    the package applies to its own executors (``floor-cached``).
    """
    from a2a.helpers import new_text_artifact
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import (
        create_agent_card_routes,
        create_jsonrpc_routes,
        create_rest_routes,
    )
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        Task,
        TaskArtifactUpdateEvent,
        TaskState,
        TaskStatus,
        TaskStatusUpdateEvent,
    )
    from starlette.applications import Starlette

    def status(task_id: str, context_id: str, state: TaskState) -> TaskStatusUpdateEvent:
        event = TaskStatusUpdateEvent(
            task_id=task_id, context_id=context_id, status=TaskStatus(state=state)
        )
        event.status.timestamp.GetCurrentTime()
        return event

    modules = None
    if through_apcore:
        from apcore import Executor

        modules = Executor(echo_registry())
        if cached:
            from apcore_a2a import cache_schemas

            modules = cache_schemas(modules)

    async def echoed(text: str) -> str:
        if modules is None:
            return text
        return str((await modules.call_async(ECHO_MODULE_ID, {"text": text}))["text"])

    class EchoExecutor(AgentExecutor):
        # The same four events, with timestamps, that our executor emits for a module call,
        # so both servers do the same store writes and the difference is adapter cost.
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task_id = context.task_id or str(uuid.uuid4())
            context_id = context.context_id or str(uuid.uuid4())
            history = [context.message] if context.message is not None else []
            task = Task(
                id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=history,
            )
            task.status.timestamp.GetCurrentTime()
            await event_queue.enqueue_event(task)
            await event_queue.enqueue_event(
                status(task_id, context_id, TaskState.TASK_STATE_WORKING)
            )
            await event_queue.enqueue_event(
                TaskArtifactUpdateEvent(
                    task_id=task_id,
                    context_id=context_id,
                    artifact=new_text_artifact("result", await echoed(context.get_user_input())),
                    last_chunk=True,
                )
            )
            await event_queue.enqueue_event(
                status(task_id, context_id, TaskState.TASK_STATE_COMPLETED)
            )

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            return None

    card = AgentCard(
        name="plain-echo",
        description="Plain a2a-sdk echo server (benchmark baseline).",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url="http://127.0.0.1/", protocol_binding="JSONRPC", protocol_version="1.0"
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id=ECHO_MODULE_ID,
                name="echo",
                description=EchoModule.description,
                tags=["bench"],
            )
        ],
    )
    store = InMemoryTaskStore() if task_store == "memory://" else sdk_task_store(task_store)
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=store, agent_card=card
    )
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url="/"),
        *create_rest_routes(handler),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        # Create the table before the first request: the SDK's lazy initialize() is not
        # safe against concurrent first requests (two CREATE TABLE on PostgreSQL).
        if hasattr(store, "initialize"):
            await store.initialize()
        yield
        if hasattr(store, "engine"):
            await store.engine.dispose()

    return Starlette(routes=routes, lifespan=lifespan)


def ours_app(**settings: Any) -> Any:
    """O: our server for the echo registry, as a user gets it from the factory."""
    from apcore_a2a import A2AServerFactory

    app, _card = A2AServerFactory(echo_registry(), **settings).create()
    return app


def build_app(kind: str, task_store: str = "memory://", **settings: Any) -> Any:
    """Build the ASGI app for *kind* (``plain``, ``floor``, ``floor-cached`` or ``ours``) on
    *task_store*.

    *settings* go to ours.
    """
    if kind in ("plain", "floor", "floor-cached"):
        floor = kind.startswith("floor")
        return plain_app(task_store, through_apcore=floor, cached=kind == "floor-cached")
    if kind == "ours" and task_store != "memory://":
        settings["task_store"] = task_store
    if kind == "ours":
        return ours_app(**settings)
    raise ValueError(f"unknown app kind {kind!r}")
