"""``/health``, ``/metrics`` and the observers and middleware behind them (docs/operations.md).

``GET /health`` says healthy, or 503 unhealthy when the task store cannot be reached; only
callers with the :data:`OPERATOR_ROLE` role (or everyone, with ``ops_details_public``) get
the details, whose ``reason`` never names the store's user, host, port or database (the log
does). Concurrent probes share one store ping, bounded by :data:`HEALTH_TIMEOUT`. Neither
endpoint carries task content.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from apcore_a2a._version import __version__
from apcore_a2a.classify import HEALTH_PATH, METRICS_PATH, request_info
from apcore_a2a.errors import MissingExtraError
from apcore_a2a.execution.identity import (
    OPERATOR_ROLE,
    caller_identity,
    visible_modules_async,
)
from apcore_a2a.execution.observer import ExecutionObserver, ExecutionTracker
from apcore_a2a.storage import StoreUnavailableError

if TYPE_CHECKING:
    from a2a.server.request_handlers import DefaultRequestHandler

    from apcore_a2a.execution.catalog import SkillCatalog
    from apcore_a2a.ops.metrics import Metrics
    from apcore_a2a.ops.telemetry import ModuleSpans
    from apcore_a2a.settings import Settings
    from apcore_a2a.storage import Stores

logger = logging.getLogger("apcore_a2a.ops")

#: Seconds a health probe waits for the task store before reporting it unreachable.
HEALTH_TIMEOUT = 0.8
_NO_STORE = {"Cache-Control": "no-store"}
METRICS_EXTRA_HINT = "metrics=True needs prometheus-client: pip install 'apcore-a2a[metrics]'"


class ServerView(Protocol):
    """What health, metrics and shutdown read of a running server: the server's state
    satisfies it, so ops never imports the server wiring (which imports ops)."""

    started_at: float
    extras: dict[str, Any]
    streams: Any  # the stream limiter (.active)
    catalog: SkillCatalog
    stores: Stores
    handler: DefaultRequestHandler
    ops: Operations
    executor: Any  # the apcore Executor (its ACL names what a caller may see)


class RequestWatch:
    """ASGI middleware: calls *on_request* once per A2A request (not card, health...)."""

    def __init__(self, app: ASGIApp, *, on_request: Callable[[], None]) -> None:
        self.app = app
        self.on_request = on_request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            info = request_info(scope)
            if info is not None and info.is_a2a:
                self.on_request()
        await self.app(scope, receive, send)


class Operations:
    """Health, metrics, telemetry and the running-execution tracker of one server."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._state: ServerView  # set by attach(), before anything is served or scraped
        self._ping: asyncio.Future[None] | None = None
        self.tracker = ExecutionTracker()
        self.metrics: Metrics | None = None
        if settings.metrics:
            try:
                from apcore_a2a.ops.metrics import Metrics
            except ImportError as exc:
                raise MissingExtraError(METRICS_EXTRA_HINT) from exc
            self.metrics = Metrics(self._live)
        self.module_spans: ModuleSpans | None = None
        if settings.telemetry:
            from apcore_a2a.ops.telemetry import ModuleSpans

            self.module_spans = ModuleSpans(legacy_names=settings.telemetry_legacy_names)
        #: monotonic deadline of a shutdown in progress (see apcore_a2a.ops.shutdown)
        self.shutdown_deadline: float | None = None
        #: the shutdown's one drain, which every caller of drain() awaits
        self.draining: asyncio.Future[None] | None = None
        #: the tasks whose final state the drain saw the store not take (no event follows)
        self.unstored: set[str] = set()
        self._last_problem: str | None = None

    def attach(self, state: ServerView) -> None:
        """Read live values (uptime, streams, store, push) from *state* from now on."""
        self._state = state

    @property
    def observers(self) -> list[ExecutionObserver]:
        """For ``ApCoreAgentExecutor(..., observers=...)``."""
        optional = (self.metrics, self.module_spans)
        return [self.tracker, *(observer for observer in optional if observer is not None)]

    def routes(self) -> list[Route]:
        # With metrics off the path still answers (404): unclaimed, the REST tenant
        # mount would redirect it to "/metrics/".
        return [
            Route(HEALTH_PATH, self.health, methods=["GET"]),
            Route(METRICS_PATH, self.metrics_endpoint, methods=["GET"]),
        ]

    def middleware(self) -> list[Middleware]:
        """Outermost first: the request span, then the request counter."""
        found: list[Middleware] = []
        if self.settings.telemetry:
            from apcore_a2a.ops.telemetry import telemetry_middleware

            found.extend(telemetry_middleware(legacy_names=self.settings.telemetry_legacy_names))
        if self.metrics is not None:
            found.append(Middleware(RequestWatch, on_request=self.metrics.count_request))
        return found

    def uptime(self) -> float:
        started = self._state.started_at
        return max(0.0, time.time() - started) if started else 0.0

    def _live(self) -> dict[str, float]:
        sender = getattr(self._state.extras.get("push"), "sender", None)
        return {
            "active_tasks": self.tracker.active,
            "uptime_seconds": round(self.uptime(), 3),
            "sse_active_streams": self._state.streams.active,
            **{
                f"push_notifications_{name}": int(getattr(sender, name, 0))
                for name in ("sent", "failed", "pending", "dropped", "retried", "held_bytes")
            },
        }

    async def health(self, request: Request) -> Response:
        # Other callers learn healthy/unhealthy only: the details tell how many skills
        # exist and which version runs, which only operators need.
        roles = getattr(caller_identity(request.scope), "roles", ())
        detailed = self.settings.ops_details_public or OPERATOR_ROLE in roles
        problem = await self.problem()
        if problem is not None:
            reason, shown = problem
            if reason != self._last_problem:
                logger.warning("health check: unhealthy: %s", reason)
            self._last_problem = reason
            body: dict[str, Any] = {"status": "unhealthy"}
            if detailed:
                body["reason"] = shown
            return JSONResponse(body, 503, headers=_NO_STORE)
        self._last_problem = None
        body = {"status": "healthy"}
        if detailed:
            body.update(
                module_count=len(self._state.catalog.ids()),
                uptime_seconds=round(self.uptime(), 3),
                version=__version__,
            )
        return JSONResponse(body, headers=_NO_STORE)

    async def problem(self) -> tuple[str, str] | None:
        """``(reason to log, reason to show)`` when the server is unhealthy, else ``None``."""
        try:
            await self._ping_store()
        except StoreUnavailableError as exc:
            # Its message names the store (user@host:port/db, driver detail): log only.
            return str(exc), "task store is unreachable (details in the server log)"
        except TimeoutError:
            reason = f"task store did not answer within {HEALTH_TIMEOUT} s"
            return reason, reason
        except Exception as exc:
            reason = f"task store check failed: {type(exc).__name__}"
            return reason, reason
        return None

    async def metrics_endpoint(self, request: Request) -> Response:
        metrics = self.metrics
        if metrics is None:
            return JSONResponse({"error": "metrics are disabled"}, 404, headers=_NO_STORE)
        accept = request.headers.get("accept", "")
        asked = request.query_params.get("format")
        if asked is None:  # a scraper's Accept names text/plain or OpenMetrics
            wanted = any(
                t in accept.lower() for t in ("text/plain", "application/openmetrics-text")
            )
        else:
            wanted = asked.lower() in ("prometheus", "openmetrics", "text")
        if wanted:
            identity = caller_identity(request.scope)
            shown: set[str] | None = None
            operator = OPERATOR_ROLE in getattr(identity, "roles", ())
            if not (self.settings.ops_details_public or operator):
                # skills the ACL hides from this caller are not named to it
                executor = self._state.executor
                shown = await visible_modules_async(executor, identity, metrics.skills())
            body, content_type = metrics.exposition(accept, shown)
            return Response(body, headers={**_NO_STORE, "Content-Type": content_type})
        return JSONResponse(metrics.snapshot(), headers=_NO_STORE)

    async def _ping_store(self) -> None:
        # One ping serves every probe that arrives while it runs, so a burst of probes
        # under load costs the store one query; a hung store costs each probe the timeout.
        ping = self._ping
        if ping is None or ping.done():
            ping = self._ping = asyncio.ensure_future(self._state.stores.ping())
            ping.add_done_callback(_consume)
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT):
                await asyncio.shield(ping)
        except TimeoutError:
            # A loop held up elsewhere (a busy machine, a blocking call) fires the timer
            # in the same turn as the ping's answer: an answered ping is the store's word.
            if not ping.done() or ping.cancelled():
                raise
            ping.result()

    async def aclose(self) -> None:
        """Stop a store ping still in flight (a hung database must not outlive the app)."""
        ping, self._ping = self._ping, None
        if ping is not None and not ping.done():
            ping.cancel()
            with contextlib.suppress(BaseException):
                await ping


def _consume(future: asyncio.Future[Any]) -> None:
    # Probes that timed out no longer wait for the ping; its outcome is still collected.
    if not future.cancelled():
        future.exception()
