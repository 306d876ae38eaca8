"""``GET /health``: is the task store reachable right now?"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ._errors import StoreUnavailableError
from .stores import Stores

__all__ = ["health_route"]


def health_route(stores: Stores, path: str = "/health") -> Route:
    """A route answering ``200 {"status": "healthy"}`` while the store answers a ping,
    else ``503 {"status": "unhealthy", "reason": ...}`` (the reason masks passwords).

    Each request probes again, so the answer follows the database without a restart.
    """

    async def health(_request: Request) -> JSONResponse:
        try:
            await stores.ping()
        except StoreUnavailableError as exc:
            return JSONResponse(
                {"status": "unhealthy", "reason": str(exc)},
                status_code=503,
                headers={"Cache-Control": "no-store"},
            )
        return JSONResponse({"status": "healthy"}, headers={"Cache-Control": "no-store"})

    return Route(path, health, methods=["GET"], name="health")
