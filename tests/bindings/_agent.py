"""The agent every binding scenario runs against: one registry, one server, three bindings.

Skills:

* ``demo.echo``      text in, ``{"text": "echo: ..."}`` out
* ``demo.add``       ``{"a", "b"}`` in, ``{"sum"}`` out (integers, so bad input is easy)
* ``demo.countdown`` a streaming module: one chunk per step, no delay
* ``demo.trace``     answers the apcore trace id it runs under (``traceparent`` propagation)
* ``demo.gate``      blocks until the test releases its ``key`` (see :class:`Gates`); it
                     makes "still running" states deterministic for cancel and subscribe
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from apcore import ModuleAnnotations, Registry
from pydantic import BaseModel, Field

from apcore_a2a import A2AServerFactory
from tests._modules import Add, Echo
from tests._support import free_port, threaded_server


class Gates:
    """Thread-safe gates shared by the test (one thread) and the server (another)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: dict[str, threading.Event] = {}
        self._released: dict[str, threading.Event] = {}

    def _pair(self, key: str) -> tuple[threading.Event, threading.Event]:
        with self._lock:
            started = self._started.setdefault(key, threading.Event())
            released = self._released.setdefault(key, threading.Event())
        return started, released

    async def pass_through(self, key: str) -> None:
        """Called by the module: announce the start, then wait for the release."""
        started, released = self._pair(key)
        started.set()
        while not released.is_set():
            await asyncio.sleep(0.005)

    async def wait_started(self, key: str, timeout: float = 10.0) -> None:
        started, _ = self._pair(key)
        deadline = time.monotonic() + timeout
        while not started.is_set():
            if time.monotonic() > deadline:
                raise AssertionError(f"gate {key!r} was never reached")
            await asyncio.sleep(0.005)

    def release(self, key: str) -> None:
        self._pair(key)[1].set()


GATES = Gates()


class CountdownIn(BaseModel):
    start: int = Field(default=3, ge=1, le=10)


class CountdownOut(BaseModel):
    remaining: int = 0
    done: bool = False


class Countdown:
    input_schema = CountdownIn
    output_schema = CountdownOut
    description = "Count down, one streamed chunk per step"
    annotations = ModuleAnnotations(streaming=True)

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"remaining": 0, "done": True}

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        for n in range(inputs.get("start", 3), 0, -1):
            yield {"remaining": n}
        yield {"remaining": 0, "done": True}


class TraceIn(BaseModel):
    text: str = ""


class TraceOut(BaseModel):
    trace: str


class Trace:
    input_schema = TraceIn
    output_schema = TraceOut
    description = "Report the trace id"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"trace": str(context.trace_id)}


class GateIn(BaseModel):
    key: str


class GateOut(BaseModel):
    released: bool


class Gate:
    input_schema = GateIn
    output_schema = GateOut
    description = "Wait until the test opens the gate"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        await GATES.pass_through(inputs["key"])
        return {"released": True}


def build_registry() -> Registry:
    registry = Registry()
    registry.register("demo.echo", Echo())
    registry.register("demo.add", Add())
    registry.register("demo.countdown", Countdown())
    registry.register("demo.trace", Trace())
    registry.register("demo.gate", Gate())
    return registry


@dataclass(frozen=True)
class Agent:
    """A running agent: its HTTP base URL and gRPC address."""

    url: str
    grpc_address: str
    app: Any


def build_app(port: int, grpc_port: int, **settings: Any) -> Any:
    app, _card = A2AServerFactory(
        build_registry(), environ={}, port=port, grpc_port=grpc_port, **settings
    ).create()
    return app


#: where the agent runs: on its own, or mounted at MOUNT_PATH in a host app that does not
#: run the agent's lifespan (the README's way)
HOSTS = ("root", "starlette", "fastapi")
MOUNT_PATH = "/agent"


def host_app(host: str, agent_app: Any) -> Any:
    """*agent_app* as the host *host* serves it (``root``: itself), wired as the README
    shows: mounted, with the agent's lifespan run by the host's for a clean shutdown (an
    agent started by its first request would leave its gRPC server running)."""
    if host == "root":
        return agent_app
    if host == "starlette":
        from starlette.applications import Starlette
        from starlette.routing import Mount

        return Starlette(
            routes=[Mount(MOUNT_PATH, app=agent_app)],
            lifespan=lambda _app: agent_app.router.lifespan_context(agent_app),
        )
    from fastapi import FastAPI

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with agent_app.router.lifespan_context(agent_app):
            yield

    api = FastAPI(lifespan=lifespan)
    api.mount(MOUNT_PATH, agent_app)
    return api


@contextlib.contextmanager
def serve_agent(host: str = "root", **settings: Any) -> Iterator[Agent]:
    """Serve the registry over JSON-RPC, REST and gRPC (1.0 + 0.3) in a background thread.

    With *host* ``starlette`` or ``fastapi`` the agent is mounted under ``/agent`` in such a
    host app and its URL is the mount's.
    """
    port, grpc_port = free_port(), free_port()
    app = build_app(port, grpc_port, **settings)
    with threaded_server(host_app(host, app), port=port) as url:
        base = url if host == "root" else url + MOUNT_PATH
        yield Agent(url=base, grpc_address=f"127.0.0.1:{grpc_port}", app=app)
