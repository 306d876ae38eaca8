"""The SDK's JSON-RPC route, handed the body the request guard already parsed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from apcore_a2a.classify import request_info

Endpoint = Callable[[Request], Awaitable[Response]]


class _Parsed(Request):
    def __init__(self, request: Request, body: bytes, payload: Any) -> None:
        super().__init__(request.scope, request.receive)
        self.raw = body
        self.parsed = payload

    async def body(self) -> bytes:
        return self.raw

    async def json(self) -> Any:
        return self.parsed


def parsed_once(route: Route) -> Route:
    """*route* (the SDK's JSON-RPC route) reading the request record's parsed body."""
    inner: Endpoint = route.endpoint

    async def endpoint(request: Request) -> Response:
        info = request_info(request.scope)
        if info is not None and info.body is not None and info.parse_error is None:
            request = _Parsed(request, info.body, info.payload)
        return await inner(request)

    return Route(route.path, endpoint, methods=list(route.methods or ()), name=route.name)
