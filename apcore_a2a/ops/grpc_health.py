"""``grpc.health.v1.Health`` for the gRPC server (with ``grpcio-health-checking``): the
``/health`` store probe reported for ``""`` and each A2A service (``Check``, ``List``);
``Watch`` follows it every :data:`HEALTH_INTERVAL` seconds."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc.aio

logger = logging.getLogger("apcore_a2a.grpc")

#: Seconds between two store probes feeding ``Health.Watch``.
HEALTH_INTERVAL = 5.0
#: The standard health service this adds (with ``grpcio-health-checking``).
HEALTH_SERVICE = "grpc.health.v1.Health"


def add_health_service(
    server: grpc.aio.Server, problem: Callable[[], Awaitable[object]], services: tuple[str, ...]
) -> Callable[[], Awaitable[None]] | None:
    """Add ``grpc.health.v1.Health`` to *server*; its stop hook, or ``None`` without the
    package. *problem* returns ``None`` when healthy."""
    try:
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc
    except ImportError:
        logger.info("grpc.health.v1 not offered: install grpcio-health-checking")
        return None

    response = health_pb2.HealthCheckResponse

    class StoreHealth(health.aio.HealthServicer):  # type: ignore[misc]
        async def refresh(self) -> None:
            status = response.SERVING if await problem() is None else response.NOT_SERVING
            for service in ("", *services):
                await self.set(service, status)

        async def Check(self, request: Any, context: Any) -> Any:
            await self.refresh()
            return await super().Check(request, context)

        async def List(self, request: Any, context: Any) -> Any:
            # grpcio-health-checking 1.85 leaves List to the generated base, which raises:
            # UNIMPLEMENTED naming NotImplementedError, and an ERROR traceback per call.
            await self.refresh()
            statuses = {}
            for service in ("", *services):
                asked = health_pb2.HealthCheckRequest(service=service)
                statuses[service] = await super().Check(asked, context)
            return health_pb2.HealthListResponse(statuses=statuses)

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
