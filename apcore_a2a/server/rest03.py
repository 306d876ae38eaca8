"""The SDK's 0.3 REST routes, with two corrections made at our boundary.

* Request errors before streaming: a2a-sdk 1.3 parses a ``/v1/message:stream`` body (and
  looks up a ``/v1/tasks/{id}:subscribe`` task) inside the SSE generator, after the ``200``
  header went out: a bad body, an unknown skill or an unknown task then just cuts the
  connection. The JSON-RPC dispatcher avoids this by pulling the first event before it
  answers; these routes get the same treatment, so such errors come back as the SDK's
  ordinary REST error responses.
* File bytes: ``fileWithBytes`` is base64 once on the wire, as the 0.3 spec says; the SDK
  decodes and encodes it twice (see :mod:`apcore_a2a.upstream.file_bytes`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from a2a.server.routes.common import create_event_source_response
from a2a.utils import json_utils
from a2a.utils.error_handlers import rest_error_handler, rest_stream_error_handler
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message

from apcore_a2a.upstream.file_bytes import (
    is_python_client,
    require_part_content,
    rest_request_to_sdk,
    rest_response_to_wire,
)

__all__ = ["eager_legacy_streams"]

_STREAM_PATHS = frozenset({"/v1/message:stream", "/v1/tasks/{id}:subscribe"})
# 0.3 routes whose bodies or answers can carry messages, hence file parts.
_MESSAGE_PATHS = frozenset({"/v1/message:send", "/v1/tasks/{id}", "/v1/tasks/{id}:cancel"})

Endpoint = Callable[[Request], Awaitable[Response]]


async def _spec_request(request: Request) -> Request:
    """*request* with its body's file bytes in the form the SDK decodes correctly.

    Raises ``InvalidParamsError`` for a message part without content.
    """
    body = await request.body()
    if request.method != "POST" or request.url.path.endswith(":cancel"):
        return request
    try:
        parsed = json.loads(body)
    except ValueError:
        return request  # the SDK answers the parse error
    require_part_content(parsed)
    if b'"fileWithBytes"' not in body or not rest_request_to_sdk(
        parsed, python_client=_python(request)
    ):
        return request
    fixed = json.dumps(parsed).encode()
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return await request.receive()
        sent = True
        return {"type": "http.request", "body": fixed, "more_body": False}

    return Request(request.scope, receive)


def _python(request: Request) -> bool:
    return is_python_client(request.headers.get("user-agent"))


def _files(endpoint: Endpoint) -> Endpoint:
    @rest_error_handler
    async def wrapped(request: Request) -> Response:
        response = await endpoint(await _spec_request(request))
        body = bytes(response.body)
        if b'"fileWithBytes"' in body:
            parsed = json.loads(body)
            if rest_response_to_wire(parsed, python_client=_python(request)):
                response.body = json.dumps(parsed).encode()
                response.headers["content-length"] = str(len(response.body))
        return response

    return wrapped


def _eager(adapter: Any, method: Any) -> Endpoint:
    @rest_stream_error_handler
    async def endpoint(request: Request) -> Response:
        request = await _spec_request(request)
        await request.body()
        python = _python(request)
        call_context = adapter._context_builder.build(request)
        stream = method(request, call_context)
        first = await anext(stream)  # request errors surface here, before the 200

        def wire(item: Any) -> str:
            rest_response_to_wire(item, python_client=python)
            return json_utils.dumps(item)

        async def events() -> AsyncIterator[str]:
            yield wire(first)
            async for item in stream:
                yield wire(item)

        response: Response = create_event_source_response(
            events(), shutdown_grace_period=adapter._shutdown_grace_period
        )
        return response

    return endpoint


def eager_legacy_streams(routes: list[BaseRoute]) -> list[BaseRoute]:
    """*routes* from ``create_rest_routes`` with the 0.3 endpoints corrected (see above)."""
    out: list[BaseRoute] = []
    for route in routes:
        endpoint = getattr(route, "endpoint", None)
        if not (
            isinstance(route, Route)
            and isinstance(endpoint, functools.partial)
            and endpoint.args
            and hasattr(endpoint.func, "__self__")
        ):
            out.append(route)
            continue
        methods = list(route.methods or ())
        if route.path in _STREAM_PATHS:
            adapter = endpoint.func.__self__
            out.append(Route(route.path, _eager(adapter, endpoint.args[0]), methods=methods))
        elif route.path in _MESSAGE_PATHS:
            out.append(Route(route.path, _files(endpoint), methods=methods))
        else:
            out.append(route)
    return out
