"""A push-enabled agent and a recording webhook receiver, both real uvicorn servers."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from apcore import ModuleAnnotations, Registry
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from apcore_a2a import A2AServerFactory

from .._modules import Add
from .._support import EXAMPLES, running_server

V1 = {"A2A-Version": "1.0"}


def _load_example() -> Any:
    spec = importlib.util.spec_from_file_location("push_receiver", EXAMPLES / "push_receiver.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


push_receiver = _load_example()


class SlowAdd(Add):
    """Adds once the test calls :meth:`release`: a task that is surely still running
    while the test registers a second push config (the agent runs in the test's loop)."""

    description = "Add two integers once released"

    def __init__(self) -> None:
        self._released = asyncio.Event()

    def release(self) -> None:
        self._released.set()

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:  # type: ignore[override]
        await self._released.wait()
        return {"sum": inputs["a"] + inputs["b"]}


class ChunksIn(BaseModel):
    n: int


class ChunksOut(BaseModel):
    i: int


class Chunks:
    """Streams ``n`` chunks: ``n`` artifact updates, so one task has many events."""

    input_schema = ChunksIn
    output_schema = ChunksOut
    description = "Stream n chunks"
    annotations = ModuleAnnotations(streaming=True)

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"i": inputs["n"]}

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        for i in range(inputs["n"]):
            yield {"i": i}


class Gate:
    """Waits until the test opens :data:`GATE` (a task that stays working on purpose)."""

    input_schema = ChunksIn
    output_schema = ChunksOut
    description = "Wait for the test's gate, then answer"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        await GATES[inputs["n"]].wait()
        return {"i": inputs["n"]}


#: Gates by number, created by the tests that use ``demo.gate`` (``{"n": k}``).
GATES: dict[int, asyncio.Event] = {}


class Transfer:
    """Needs approval: the task parks in input-required until a follow-up decides."""

    input_schema = ChunksIn
    output_schema = ChunksOut
    description = "Do something that needs approval"
    annotations = ModuleAnnotations(requires_approval=True)

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"i": inputs["n"]}


def demo_registry(slow: SlowAdd | None = None) -> Registry:
    registry = Registry()
    registry.register("demo.add", Add())
    registry.register("demo.slow_add", slow or SlowAdd())
    registry.register("demo.chunks", Chunks())
    registry.register("demo.gate", Gate())
    registry.register("demo.transfer", Transfer())
    return registry


def push_app(registry: Registry | None = None, **overrides: Any) -> Starlette:
    """An agent app with push notifications on (insecure URLs allowed), not yet served:
    ``task_store=..., cluster=True`` makes one replica of several."""
    settings: dict[str, Any] = {
        "push_notifications": True,
        "push_allow_insecure_urls": True,
        "port": _free_port(),
        **overrides,
    }
    app, _card = A2AServerFactory(registry or demo_registry(), environ={}, **settings).create()
    return app


@contextlib.asynccontextmanager
async def push_agent(
    registry: Registry | None = None, **overrides: Any
) -> AsyncIterator[tuple[str, Starlette]]:
    """A real agent on 127.0.0.1 with push notifications on (insecure URLs allowed)."""
    port = overrides.pop("port", None) or _free_port()
    app = push_app(registry, port=port, **overrides)
    async with running_server(app, port=port) as base:
        yield base, app


def _free_port() -> int:
    from .._support import free_port

    return free_port()


@dataclass
class Delivery:
    path: str
    at: float
    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def event(self) -> dict[str, Any]:
        return json.loads(self.body)  # type: ignore[no-any-return]


@dataclass
class Receiver:
    """Records every POST; ``fail_first[path]`` answers 500 that many times first,
    ``always[path]`` answers that status every time."""

    fail_first: dict[str, int] = field(default_factory=dict)
    always: dict[str, int] = field(default_factory=dict)
    log: list[Delivery] = field(default_factory=list)
    base: str = ""
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            path = request.url.path
            body = await request.body()
            if path in self.always:
                status = self.always[path]
            elif self.fail_first.get(path, 0) > 0:
                self.fail_first[path] -= 1
                status = 500
            else:
                status = 204
            self.log.append(Delivery(path, time.monotonic(), dict(request.headers), body, status))
            self.changed.set()
            return Response(status_code=status)

        return Starlette(routes=[Route("/{name:path}", hook, methods=["POST"])])

    def url(self, path: str) -> str:
        return self.base + path

    def accepted(self, path: str) -> list[Delivery]:
        return [d for d in self.log if d.path == path and d.status < 300]

    def attempts(self, path: str) -> list[Delivery]:
        return [d for d in self.log if d.path == path]

    async def wait_for(self, predicate: Any, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"receiver condition not met in {timeout}s: {self.log}")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), remaining)


@contextlib.asynccontextmanager
async def receiver(**kwargs: Any) -> AsyncIterator[Receiver]:
    rec = Receiver(**kwargs)
    async with running_server(rec.app()) as base:
        rec.base = base
        yield rec


@dataclass
class Replicas:
    """Two push agents serving one task store as cluster replicas, beside a receiver."""

    rec: Receiver
    client: httpx.AsyncClient
    a: Starlette
    b: Starlette
    base_a: str
    base_b: str


@contextlib.asynccontextmanager
async def two_replicas(task_store: str, **overrides: Any) -> AsyncIterator[Replicas]:
    """A webhook receiver and two push agents serving *task_store* as cluster replicas.

    The client's timeout is a hang guard, not a bound on the agents: a blocking
    ``SendMessage`` answers once its task has run, and in cluster mode on PostgreSQL a task
    of five chunks is some 55 statements one after the other (its quota slot and claim,
    each event saved, the configs read for each event and each webhook attempt) on the one
    loop that also runs the other replica, the receiver and the retries. Four such tests
    at once beside busy loops took 2.4 to 5.8 s for it (1 s at the quietest), spread
    evenly over the statements, no stall; with the test's core shared by 40 busy loops it
    passed 10 s (a ``ReadTimeout``, as once in a run of the suite under load).
    """
    a, b = (push_app(task_store=task_store, cluster=True, **overrides) for _ in range(2))
    async with (
        receiver() as rec,
        running_server(a) as base_a,
        running_server(b) as base_b,
        httpx.AsyncClient(timeout=60) as client,
    ):
        yield Replicas(rec, client, a, b, base_a, base_b)


def add_message(a: int = 2, b: int = 3) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": {"a": a, "b": b}, "mediaType": "application/json"}],
        "metadata": {"skillId": "demo.add"},
    }


def skill_message(skill: str, n: int) -> dict[str, Any]:
    """A 1.0 message for ``demo.chunks`` / ``demo.gate`` / ``demo.transfer`` with ``{"n": n}``."""
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": {"n": n}, "mediaType": "application/json"}],
        "metadata": {"skillId": skill},
    }


async def rpc(
    client: httpx.AsyncClient, base: str, method: str, params: dict[str, Any], version: str = "1.0"
) -> dict[str, Any]:
    response = await client.post(
        base + "/",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={"A2A-Version": version},
    )
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def statuses(
    client: httpx.AsyncClient, base: str, task_id: str, headers: dict[str, str] | None = None
) -> dict[str, tuple[str, str | None]]:
    """``{config id: (status, statusReason)}`` of a task's configs, from the owner's
    ``GET /push/status/{task_id}`` (A2A's config answers carry no status)."""
    response = await client.get(f"{base}/push/status/{task_id}", headers=headers)
    assert response.status_code == 200, response.text
    return {c["id"]: (c["status"], c["statusReason"]) for c in response.json()["configs"]}
