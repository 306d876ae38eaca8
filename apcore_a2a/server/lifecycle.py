"""The agent's optional parts (:class:`Feature`), and starting and stopping its work.

A :class:`Feature` brings routes, middleware at a named place and a start/stop pair (run
in order, and in reverse on the way down); the factory never special-cases one. Places,
outermost first: :data:`EDGE`, app-wide before routing (trusted hosts, CORS); then on each
matched route, after the request record: :data:`OBSERVE` (telemetry, counters),
:data:`AUTH`, :data:`GUARD` (the request guard), :data:`INNER` (response shaping).

A host app that mounts the agent usually does not run a mounted app's lifespan, so
:class:`StartOnFirstRequest` starts the same work on the first request (for a clean
shutdown the host wires our lifespan into its own, see docs/deployment.md).

Process-wide tuning (``gc.freeze()`` after start) only with ``process_tuning`` (by default
under ``serve()`` and the CLI, which own the process), and undone on stop. Sync modules run
on the agent's own thread pool (``ApCoreAgentExecutor``), never the loop's default one.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from a2a.server.request_handlers import DefaultRequestHandler
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from apcore_a2a.execution.catalog import SkillCatalog
from apcore_a2a.execution.executor import ApCoreAgentExecutor
from apcore_a2a.ops.operations import Operations
from apcore_a2a.ops.shutdown import close_runs, drain
from apcore_a2a.server.caller_keys import own_server_note
from apcore_a2a.server.limits import StreamLimiter
from apcore_a2a.settings import Settings
from apcore_a2a.storage import Stores

logger = logging.getLogger("apcore_a2a.server")

EDGE, OBSERVE, AUTH, GUARD, INNER = 10, 20, 30, 40, 50
#: scope extension set by ``A2AClient(app=...)`` (kept in step with apcore_a2a.client)
IN_PROCESS = "apcore_a2a.in_process"

Hook = Callable[[], Awaitable[None]]


@dataclass
class Feature:
    """One optional part of the agent (see the module docstring)."""

    name: str
    routes: Sequence[BaseRoute] = ()
    #: (place, middleware) pairs; the place is one of EDGE, OBSERVE, AUTH, INNER
    middleware: Sequence[tuple[int, Middleware]] = ()
    start: Hook | None = None
    stop: Hook | None = None
    #: the feature's own object (a push kit, a gRPC server...), for operations to read
    handle: Any = None


def middleware_stack(
    features: Iterable[Feature], core: Sequence[tuple[int, Middleware]]
) -> tuple[list[Middleware], list[Middleware]]:
    """(app-wide, per-route) middleware, each outermost first: by place, then as given."""
    entries = sorted([*core, *(e for f in features for e in f.middleware)], key=lambda e: e[0])
    return [m for p, m in entries if p <= EDGE], [m for p, m in entries if p > EDGE]


#: Host names of this machine's loopback interface, always answered. The check defends
#: against DNS rebinding, where a browser names the attacker's host, never one of these; a
#: cross-origin page reaching a loopback address is the request guard's business (JSON
#: bodies only). Probes on the agent's machine (the image's HEALTHCHECK) send them.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})


def host_feature(settings: Settings) -> Feature | None:
    """Refuse ``Host`` headers the agent does not answer to (DNS rebinding) with 400;
    ``None`` to answer any (a bind on every interface, no url)."""
    hosts = set(LOOPBACK_HOSTS)
    if settings.allowed_hosts:
        if "*" in settings.allowed_hosts:
            return None
        hosts.update(settings.allowed_hosts)
    else:
        # "testserver" is the name Starlette's TestClient sends; it resolves nowhere, so
        # it opens no door to DNS rebinding.
        hosts.add("testserver")
        if settings.url:
            hosts.add(urlsplit(settings.url).hostname or "localhost")
        elif settings.host in ("0.0.0.0", "::", ""):
            return None
        else:
            hosts.add(settings.host)
    check = Middleware(HostCheck, allowed_hosts=sorted(hosts))
    return Feature("allowed-hosts", middleware=[(EDGE, check)])


class HostCheck(TrustedHostMiddleware):
    """Starlette's ``TrustedHostMiddleware``, except for calls made in this process
    (``A2AClient(app=...)``: no socket, so no browser in between, whatever Host it names)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if IN_PROCESS in (scope.get("extensions") or {}):
            await self.app(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


@dataclass
class ServerState:
    """Live objects of one server, shared with ops endpoints and tests."""

    settings: Settings
    executor: Any
    catalog: SkillCatalog
    handler: DefaultRequestHandler
    stores: Stores
    streams: StreamLimiter
    agent_executor: ApCoreAgentExecutor
    ops: Operations
    started_at: float = 0.0
    extras: dict[str, Any] = field(default_factory=dict)


#: What an agent without authentication says at start (docs/auth.md, "Task owners").
SINGLE_TENANT = (
    "no authentication configured: this agent is single-tenant, every caller is one "
    "anonymous owner (each lists, reads and cancels every task, and registers webhooks on "
    "them); configure api_keys or JWT to keep callers apart"
)


class Lifecycle:
    """Start (once) and stop the stores, the features and module watching of one app."""

    def __init__(
        self,
        state: ServerState,
        features: Sequence[Feature],
        *,
        tuning: bool,
        own_server: bool = False,
    ) -> None:
        self.state = state
        self.features = tuple(features)
        self.tuning = tuning
        #: run under a server of its operator's own (mounted, or async_serve's app), not
        #: by serve() or the CLI: HTTP's settings (forwarded_allow_ips) are that server's
        self.own_server = own_server
        self.started = False
        #: stopped for good (a request arriving during or after shutdown starts nothing)
        self.closed = False
        self._lock = asyncio.Lock()
        self._stopped: list[Feature] = []

    async def start(self) -> None:
        """Start everything; a second call (or a concurrent one) does nothing."""
        async with self._lock:
            if self.started or self.closed:
                return
            self.state.started_at = time.time()
            note = own_server_note(self.state.settings) if self.own_server else None
            if note is not None:
                logger.warning(note)
            if not any(feature.name == "auth" for feature in self.features):
                # Loud only where callers beyond this machine reach it.
                local = self.state.settings.host in LOOPBACK_HOSTS and not self.own_server
                logger.log(logging.INFO if local else logging.WARNING, SINGLE_TENANT)
            await self.state.stores.start()
            try:
                for feature in self.features:
                    if feature.start is not None:
                        await feature.start()
                    self._stopped.append(feature)
            except BaseException:
                # A feature that failed to start (a port taken) leaves nothing running in
                # the host's process: no store loop, session or filter of an agent that
                # never served.
                await self._close()
                raise
            self.state.catalog.watch()
            self.started = True
            if self.tuning:
                # What exists now (modules, schemas, SDK, card) lives as long as the server.
                # Frozen, the cyclic GC stops re-scanning it in every full collection, which
                # otherwise costs a few hundred µs per request (see benchmarks/RESULTS.md).
                gc.freeze()

    async def stop(self) -> None:
        """Drain running tasks within ``shutdown_timeout``, then stop in reverse order."""
        async with self._lock:
            self.closed = True
            if not self.started:
                return
            self.started = False
            state = self.state
            state.catalog.unwatch()
            try:
                # The drain serve() began on SIGTERM, if it did: the store closes after it.
                await drain(state, state.settings.shutdown_timeout)
                # Bounded: a run that does not take its cancel holds the close for ever.
                await close_runs(state, state.agent_executor.running_task_ids)
            finally:
                await self._close()
                state.agent_executor.close()
                if self.tuning:
                    gc.unfreeze()  # let this app's own cycles be collected once it is gone

    async def _close(self) -> None:
        """Stop the started features in reverse order, then operations and the stores."""
        for feature in reversed(self._stopped):
            if feature.stop is not None:
                try:
                    await feature.stop()
                except Exception:
                    logger.exception("stopping %s failed", feature.name)
        self._stopped.clear()
        await self.state.ops.aclose()
        await self.state.stores.aclose()

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any) -> AsyncIterator[None]:
        """The app's lifespan; also what a host app runs to wire ours into its own."""
        await self.start()
        try:
            yield
        finally:
            await self.stop()


@dataclass
class StartOnFirstRequest:
    """Outermost middleware: start the lifecycle if no lifespan did (a mounted app)."""

    app: ASGIApp
    lifecycle: Lifecycle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lifecycle = self.lifecycle
        if not lifecycle.started and not lifecycle.closed and scope["type"] != "lifespan":
            logger.info(
                "the host app did not run this agent's lifespan: starting its background "
                "work now (wire agent.router.lifespan_context into the host's lifespan for "
                "a clean shutdown)"
            )
            await lifecycle.start()
        await self.app(scope, receive, send)
