"""The SDK's 0.3 REST streams, pulling the first event before the ``200`` so that request
errors are ordinary REST error responses.
"""

from __future__ import annotations

import apcore_a2a.upstream.client_first  # noqa: F401  (before the SDK server: see it)

# isort: split
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from a2a.compat.v0_3.context_builders import V03ServerCallContextBuilder
from a2a.compat.v0_3.rest_handler import REST03Handler
from a2a.server.routes.common import (
    DefaultServerCallContextBuilder,
    ServerCallContextBuilder,
    create_event_source_response,
)
from a2a.utils import json_utils
from a2a.utils.error_handlers import rest_stream_error_handler
from starlette.requests import Request
from starlette.responses import Response

from apcore_a2a.upstream.file_bytes import is_python_client, rest_response_to_wire, spec_request

Endpoint = Callable[[Request], Awaitable[Response]]


def eager_streams(
    handler: Any, context_builder: ServerCallContextBuilder | None, grace: float
) -> dict[str, Endpoint]:
    """Endpoint per 0.3 stream path (see the module docstring)."""
    legacy = REST03Handler(request_handler=handler)
    builder = V03ServerCallContextBuilder(context_builder or DefaultServerCallContextBuilder())

    def eager(method: Any) -> Endpoint:
        @rest_stream_error_handler
        async def endpoint(request: Request) -> Response:
            request = await spec_request(request)
            await request.body()
            python = is_python_client(request.headers.get("user-agent"))
            stream = method(request, builder.build(request))
            try:
                first = await anext(stream)  # request errors surface here, before the 200
            except StopAsyncIteration:  # nothing to send (a resume from the last event)
                return create_event_source_response(iter([]), shutdown_grace_period=grace)

            def wire(item: Any) -> str:
                rest_response_to_wire(item, python_client=python)
                return json_utils.dumps(item)

            async def events() -> AsyncIterator[str]:
                yield wire(first)
                async for item in stream:
                    yield wire(item)

            response: Response = create_event_source_response(events(), shutdown_grace_period=grace)
            return response

        return endpoint

    return {
        "/v1/message:stream": eager(legacy.on_message_send_stream),
        "/v1/tasks/{id}:subscribe": eager(legacy.on_subscribe_to_task),
    }
