"""Make the SDK's 0.3 REST streaming routes answer request errors before streaming.

a2a-sdk 1.3 parses a ``/v1/message:stream`` body (and looks up a ``/v1/tasks/{id}:subscribe``
task) inside the SSE generator, after the ``200`` header went out: a bad body, an unknown
skill or an unknown task then just cuts the connection. The JSON-RPC dispatcher avoids this
by pulling the first event before it answers; these routes get the same treatment here,
so such errors come back as the SDK's ordinary REST error responses.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

from a2a.server.routes.common import create_event_source_response
from a2a.utils import json_utils
from a2a.utils.error_handlers import rest_stream_error_handler
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

__all__ = ["eager_legacy_streams"]

_STREAM_PATHS = frozenset({"/v1/message:stream", "/v1/tasks/{id}:subscribe"})


def _eager(adapter: Any, method: Any) -> Any:
    @rest_stream_error_handler
    async def endpoint(request: Request) -> Response:
        await request.body()
        call_context = adapter._context_builder.build(request)
        stream = method(request, call_context)
        first = await anext(stream)  # request errors surface here, before the 200

        async def events() -> AsyncIterator[str]:
            yield json_utils.dumps(first)
            async for item in stream:
                yield json_utils.dumps(item)

        response: Response = create_event_source_response(
            events(), shutdown_grace_period=adapter._shutdown_grace_period
        )
        return response

    return endpoint


def eager_legacy_streams(routes: list[BaseRoute]) -> list[BaseRoute]:
    """*routes* from ``create_rest_routes`` with the 0.3 streaming endpoints replaced."""
    out: list[BaseRoute] = []
    for route in routes:
        endpoint = getattr(route, "endpoint", None)
        if (
            isinstance(route, Route)
            and route.path in _STREAM_PATHS
            and isinstance(endpoint, functools.partial)
            and endpoint.args
            and hasattr(endpoint.func, "__self__")
        ):
            adapter = endpoint.func.__self__
            out.append(
                Route(
                    route.path, _eager(adapter, endpoint.args[0]), methods=list(route.methods or ())
                )
            )
        else:
            out.append(route)
    return out
