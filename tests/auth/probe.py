"""A tiny Starlette app behind :class:`AuthMiddleware` that reports who the caller is."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route

from apcore_a2a.auth import Authenticator, AuthMiddleware, current_identity
from apcore_a2a.classify import layered
from apcore_a2a.execution.identity import caller_identity
from tests._support import running_server


async def whoami(request: Request) -> Response:
    in_scope = caller_identity(request.scope)
    in_var = current_identity()
    body: dict[str, Any] = {"scope": None, "var": None}
    if in_scope is not None:
        body["scope"] = {
            "id": in_scope.id,
            "type": in_scope.type,
            "roles": list(in_scope.roles),
            "attrs": in_scope.attrs,
        }
    if in_var is not None:
        body["var"] = in_var.id
    if request.method == "POST":
        body["echo"] = (await request.body()).decode()
    return JSONResponse(body)


async def ok(request: Request) -> Response:
    return PlainTextResponse("ok")


ROUTES = [
    Route("/", whoami, methods=["POST"]),
    Route("/whoami", whoami, methods=["GET", "POST"]),
    Route("/tasks", ok),
    Route("/health", ok),
    Route("/metrics", ok),
    Route("/.well-known/agent-card.json", ok),
    Route("/.well-known/agent.json", ok),
    Route("/.well-known/jwks.json", ok),
    Route("/extendedAgentCard", ok),
    Route("/v1/card", ok),
    Route("/agent/authenticatedExtendedCard", ok),
    Route("/explorer", ok, methods=["GET", "POST"]),
    Route("/explorer/app.js", ok, methods=["GET", "POST"]),
    # last, as the SDK mounts it
    Mount(
        "/{tenant}",
        routes=[Route("/extendedAgentCard", ok), Route("/message:send", ok, methods=["POST"])],
    ),
]


def probe_app(
    authenticator: Authenticator, *, explorer: str | None = None, **options: Any
) -> Starlette:
    """*authenticator* on routes that record the request, as in the agent (*explorer*: prefix)."""
    auth = Middleware(AuthMiddleware, authenticator=authenticator, **options)
    app = Starlette(routes=layered(ROUTES, [auth], explorer_prefix=explorer))
    app.router.redirect_slashes = False  # as the agent's router (server/unrouted.py)
    return app


@contextlib.asynccontextmanager
async def serve_probe(authenticator: Authenticator, **options: Any) -> AsyncIterator[str]:
    async with running_server(probe_app(authenticator, **options)) as base:
        yield base
