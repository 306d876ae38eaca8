"""The SDK's 0.3 REST routes, with ``fileWithBytes`` base64 once on the wire.

The A2A 0.3 spec (``FileWithBytes.bytes``: base64 content) puts the file's bytes on the
wire base64-encoded once; a2a-sdk 1.3's 0.3 REST routes decode and encode them twice (see
:mod:`apcore_a2a.adapters.file_bytes`, which also knows the genuine 0.3 Python client's
own habit). Request bodies are converted before the SDK reads them, answers after.
Watched by ``tests/interop/test_file_bytes.py::test_sdk_still_decodes_03_proto_file_bytes_twice``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from a2a.utils.error_handlers import rest_error_handler
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message

from apcore_a2a.upstream.file_bytes import (
    is_python_client,
    require_part_content,
    rest_request_to_sdk,
    rest_response_to_wire,
)

__all__ = ["MESSAGE_PATHS", "python_client", "spec_request", "with_spec_files"]

#: 0.3 routes whose bodies or answers can carry messages, hence file parts.
MESSAGE_PATHS = frozenset({"/v1/message:send", "/v1/tasks/{id}", "/v1/tasks/{id}:cancel"})

Endpoint = Callable[[Request], Awaitable[Response]]


async def spec_request(request: Request) -> Request:
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
        parsed, python_client=python_client(request)
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


def python_client(request: Request) -> bool:
    return is_python_client(request.headers.get("user-agent"))


def with_spec_files(endpoint: Endpoint) -> Endpoint:
    """The SDK's 0.3 *endpoint*, reading and answering file bytes as the spec says."""

    @rest_error_handler
    async def wrapped(request: Request) -> Response:
        response = await endpoint(await spec_request(request))
        body = bytes(response.body)
        if b'"fileWithBytes"' in body:
            parsed = json.loads(body)
            if rest_response_to_wire(parsed, python_client=python_client(request)):
                response.body = json.dumps(parsed).encode()
                response.headers["content-length"] = str(len(response.body))
        return response

    return wrapped
