"""The SDK's A2A routes (JSON-RPC 1.0+0.3, REST 1.0+0.3), adjusted where it falls short.

* The JSON-RPC endpoint is handed the body the request guard already parsed (the request
  record's payload), so a request body is parsed once.
* The 0.3 REST streaming endpoints answer request errors before the stream starts
  (:mod:`apcore_a2a.server.rest03`).

REST routes come last: the SDK mounts them under ``/{tenant}`` too, which would otherwise
take any two-segment path (the classifier refuses reserved segments as tenants).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apcore_a2a.classify import request_info
from apcore_a2a.server.rest03 import eager_legacy_streams

__all__ = ["a2a_routes"]

Endpoint = Callable[[Request], Awaitable[Response]]


def a2a_routes(
    handler: Any, *, rpc_path: str, context_builder: Any, stream_grace: float
) -> tuple[list[BaseRoute], list[BaseRoute]]:
    """``(JSON-RPC routes, REST routes)`` for *handler*; mount REST after everything else."""
    rpc = [
        _parsed_once(route)
        for route in create_jsonrpc_routes(
            handler,
            rpc_url=rpc_path,
            context_builder=context_builder,
            enable_v0_3_compat=True,
            shutdown_grace_period=stream_grace,
        )
    ]
    rest = eager_legacy_streams(
        create_rest_routes(
            handler,
            context_builder=context_builder,
            enable_v0_3_compat=True,
            shutdown_grace_period=stream_grace,
        )
    )
    return rpc, rest


def _parsed_once(route: BaseRoute) -> BaseRoute:
    if not isinstance(route, Route):
        return route
    inner: Endpoint = route.endpoint

    async def endpoint(request: Request) -> Response:
        info = request_info(request.scope)
        if info is not None and info.body is not None and info.parse_error is None:
            # Starlette's Request caches these; the SDK's request.json() then reuses them.
            request._body = info.body
            request._json = info.payload
        return await inner(request)

    return Route(route.path, endpoint, methods=list(route.methods or ()), name=route.name)
