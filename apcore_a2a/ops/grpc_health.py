"""``grpc.health.v1.Health`` for the gRPC server (with ``grpcio-health-checking``): the
``/health`` store probe reported for ``""`` and each A2A service (``Check``, ``List``);
``Watch`` follows it every :data:`HEALTH_INTERVAL` seconds.

At a stop every service is ``NOT_SERVING`` from its first moment (a balancer watching
learns the agent is going), and each ``Watch`` stream ends with status OK once the drain
has ended (by the server's ``CallEnds``). The package's own
servicer ends no ``Watch``: grpc's stop waited for them until its grace ran out (the
whole stop with it), then cut them ``UNAVAILABLE`` "Cancelling all calls". So the
servicer is ours, on the package's generated base; its statuses live here."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import grpc.aio

logger = logging.getLogger("apcore_a2a.grpc")

#: Seconds between two store probes feeding ``Health.Watch``.
HEALTH_INTERVAL = 5.0
#: The standard health service this adds (with ``grpcio-health-checking``).
HEALTH_SERVICE = "grpc.health.v1.Health"


def add_health_service(
    server: grpc.aio.Server,
    problem: Callable[[], Awaitable[object]],
    services: tuple[str, ...],
    ends: Callable[[Callable[[], None]], None],
) -> Callable[[], Awaitable[None]] | None:
    """Add ``grpc.health.v1.Health`` to *server*; what to await as the stop begins (the
    probes stop, every service is ``NOT_SERVING``), or ``None`` without the package.
    *problem* returns ``None`` when healthy; *ends* is handed what ends its Watch streams
    once the drain has ended (``CallEnds.also``)."""
    try:
        from grpc_health.v1 import health_pb2, health_pb2_grpc
    except ImportError:
        logger.info("grpc.health.v1 not offered: install grpcio-health-checking")
        return None

    response = health_pb2.HealthCheckResponse
    names = ("", *services)

    class StoreHealth(health_pb2_grpc.HealthServicer):  # type: ignore[misc]
        def __init__(self) -> None:
            self.statuses: dict[str, int] = dict.fromkeys(names, response.SERVING)
            self.changed = asyncio.Event()  # set, then replaced, at each change
            self.going = self.ended = False

        def report(self, status: int) -> None:
            if any(self.statuses[name] != status for name in names):
                self.statuses = dict.fromkeys(names, status)
                self.changed.set()
                self.changed = asyncio.Event()

        async def refresh(self) -> None:
            healthy = await problem() is None
            if not self.going:  # a probe that ends after the stop began changes nothing
                self.report(response.SERVING if healthy else response.NOT_SERVING)

        async def Check(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
            await self.refresh()
            status = self.statuses.get(request.service)
            if status is None:
                await context.abort(grpc.StatusCode.NOT_FOUND)
            return response(status=status)

        async def List(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
            # grpcio-health-checking 1.85 leaves List to the generated base, which raises:
            # UNIMPLEMENTED naming NotImplementedError, and an ERROR traceback per call.
            await self.refresh()
            statuses = {name: response(status=s) for name, s in self.statuses.items()}
            return health_pb2.HealthListResponse(statuses=statuses)

        async def Watch(self, request: Any, context: grpc.aio.ServicerContext) -> None:
            last = None
            while True:
                changed, ended = self.changed, self.ended  # before the read: no change lost
                status = self.statuses.get(request.service, response.SERVICE_UNKNOWN)
                if status != last:
                    await context.write(response(status=status))
                    last = status
                if ended:
                    return  # status OK: the stream ran out
                await changed.wait()

        def stop(self) -> None:
            self.going = True
            self.report(response.NOT_SERVING)

        def end(self) -> None:
            self.stop()  # NOT_SERVING before the end, whatever ran first
            self.ended = True
            self.changed.set()

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
    ends(servicer.end)

    async def going() -> None:
        servicer.stop()
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop

    return going
