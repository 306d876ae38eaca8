"""gRPC on par with HTTP for operations: request counting, request spans, health.

* Every A2A gRPC call is counted in ``/metrics`` (``apcore_a2a_requests``, the counter
  HTTP requests feed) and, with ``telemetry`` on, runs inside a SERVER span named after
  the A2A method, as HTTP calls are (``ops/telemetry.py``, ``rpc_span``), so module
  spans are its children as they are under an HTTP request span.
* ``grpc.health.v1.Health`` answers ``SERVING`` / ``NOT_SERVING`` for the whole server
  (``""``) and for each A2A service, from the same store probe as ``/health``; ``Check``
  probes at once, ``Watch`` streams changes (probed every ``HEALTH_INTERVAL`` seconds).
  It needs ``grpcio-health-checking`` (in the ``grpc`` extra); without it the service is
  simply not offered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import grpc

__all__ = ["HEALTH_INTERVAL", "CallObserver", "a2a_method", "add_health_service"]

logger = logging.getLogger("apcore_a2a.grpc")

#: Seconds between two store probes feeding ``Health.Watch``.
HEALTH_INTERVAL = 5.0
#: 0.3 gRPC method names that differ from their 1.0 name.
_V03_NAMES = {
    "TaskSubscription": "SubscribeToTask",
    "GetAgentCard": "GetExtendedAgentCard",
    "ListTaskPushNotificationConfig": "ListTaskPushNotificationConfigs",
}

Problem = Callable[[], Awaitable[object]]  # None when healthy


def a2a_method(path: str) -> str:
    """``/lf.a2a.v1.A2AService/SendMessage`` -> ``SendMessage`` (0.3 names mapped to 1.0)."""
    name = path.rsplit("/", 1)[-1]
    return _V03_NAMES.get(name, name)


class CallObserver:
    """What operations do around each A2A gRPC call: count it, trace it."""

    def __init__(
        self, count: Callable[[], None] | None, tracer: Any = None, legacy_names: bool = False
    ) -> None:
        self._count = count
        self._tracer = tracer
        self._legacy = legacy_names

    @classmethod
    def for_operations(cls, operations: Any) -> CallObserver:
        metrics = getattr(operations, "metrics", None)
        settings = getattr(operations, "settings", None)
        tracer = None
        if getattr(settings, "telemetry", False):
            from opentelemetry import trace

            from apcore_a2a._version import __version__
            from apcore_a2a.ops.telemetry import TRACER_NAME

            tracer = trace.get_tracer(TRACER_NAME, __version__)
        legacy = bool(getattr(settings, "telemetry_legacy_names", False))
        return cls(metrics.count_request if metrics is not None else None, tracer, legacy)

    @contextlib.contextmanager
    def call(
        self, path: str, request: Any = None, context: Any = None
    ) -> Iterator[Callable[[Any], None]]:
        """Count the call, and trace it; yields what to call with each response."""
        if self._count is not None:
            self._count()
        if self._tracer is None:
            yield lambda _response: None
            return
        from apcore_a2a.ops.telemetry import rpc_span

        method = a2a_method(path)
        with rpc_span(self._tracer, path, method, request, context, legacy=self._legacy) as seen:
            yield seen


def add_health_service(
    server: grpc.aio.Server, problem: Problem, services: tuple[str, ...]
) -> Callable[[], Awaitable[None]] | None:
    """Add ``grpc.health.v1.Health`` to *server*; returns its stop hook (or ``None``
    when ``grpcio-health-checking`` is not installed)."""
    try:
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc
    except ImportError:
        logger.info("grpc.health.v1 not offered: install grpcio-health-checking")
        return None

    serving = health_pb2.HealthCheckResponse.SERVING
    not_serving = health_pb2.HealthCheckResponse.NOT_SERVING

    class StoreHealth(health.aio.HealthServicer):  # type: ignore[misc]
        async def refresh(self) -> None:
            reason = await problem()
            status = serving if reason is None else not_serving
            for service in ("", *services):
                await self.set(service, status)

        async def Check(self, request: Any, context: Any) -> Any:
            await self.refresh()
            return await super().Check(request, context)

    servicer = StoreHealth()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)

    async def watch() -> None:
        while True:
            try:
                await servicer.refresh()
            except Exception:  # a probe that fails is NOT_SERVING next time, not a crash
                logger.exception("gRPC health probe failed")
            await asyncio.sleep(HEALTH_INTERVAL)

    loop = asyncio.ensure_future(watch())

    async def stop() -> None:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
        await servicer.enter_graceful_shutdown()

    return stop
