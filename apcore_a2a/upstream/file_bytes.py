"""Inline file bytes on REST 0.3 and gRPC 0.3 in the spec's single base64 encoding.

a2a-sdk 1.3's 0.3 conversions decode and encode ``file_with_bytes`` twice, and so do the
Python SDK's 0.3 clients. So:

* requests: the spec's encoding; the Python SDK's double one only when both a Python
  HTTP/gRPC stack (:func:`is_python_client`) sent it and the once-decoded field is itself
  canonical padded base64 (:func:`looks_base64`);
* answers: the spec's encoding, except to a Python stack, which decodes twice too.

Walks skip ``data`` and ``metadata`` (user data), and refuse a part with no content, which
the SDK's conversion meets with a bare ``ValueError``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.utils.error_handlers import rest_error_handler
from a2a.utils.errors import InvalidParamsError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message

_PART_KINDS = ("text", "file", "data")
_EMPTY_PART = "A message part has no content: give text, file or data"

_JSON_KEY = "fileWithBytes"
_OPAQUE = frozenset({"data", "metadata"})
# User-Agent prefixes of the stacks the Python SDK clients run on (httpx for JSON-RPC and
# REST, grpcio for gRPC); other clients never get the double encoding read as such.
_PYTHON_AGENTS = ("python-httpx/", "grpc-python/", "grpc-python-asyncio/")
#: 0.3 REST routes whose bodies or answers can carry messages, hence file parts.
MESSAGE_PATHS = frozenset({"/v1/message:send", "/v1/tasks/{id}", "/v1/tasks/{id}:cancel"})

Endpoint = Callable[[Request], Awaitable[Response]]


def is_python_client(user_agent: str | None) -> bool:
    """True when *user_agent* names the HTTP or gRPC stack of the Python SDK clients."""
    return user_agent is not None and user_agent.strip().lower().startswith(_PYTHON_AGENTS)


def looks_base64(payload: bytes) -> bool:
    """True when *payload* is non-empty, canonical, padded standard base64 text."""
    if not payload:
        return False
    try:
        return base64.b64encode(base64.b64decode(payload, validate=True)) == payload
    except ValueError:
        return False


def undecodable_rpc03(payload: Any) -> str | None:
    """Why the file bytes of a JSON-RPC 0.3 ``message/send``/``message/stream`` *payload*
    cannot be decoded as the SDK's conversion decodes them (``base64.b64decode``), else
    ``None``."""
    params = payload.get("params") if isinstance(payload, dict) else None
    message = params.get("message") if isinstance(params, dict) else None
    parts = message.get("parts") if isinstance(message, dict) else None
    for i, part in enumerate(parts if isinstance(parts, list) else ()):
        file = part.get("file") if isinstance(part, dict) else None
        content = file.get("bytes") if isinstance(file, dict) else None
        if isinstance(content, str):
            try:
                base64.b64decode(content)
            except ValueError:
                return f"message.parts[{i}].file.bytes is not base64"
    return None


def _sdk_bytes(payload: bytes, python_client: bool) -> bytes:
    """What the SDK must find in the proto field so that it ends up with the file."""
    if python_client and looks_base64(payload):
        return payload  # the Python SDK's double encoding: the SDK's decoding is right for it
    return base64.b64encode(payload)


def _spec_bytes(sdk_value: bytes) -> bytes:
    """The file, from the base64 text the SDK put into the proto field."""
    try:
        return base64.b64decode(sdk_value, validate=True)
    except ValueError:
        return sdk_value  # not produced by the SDK's encoder; leave it alone


def _json_bytes(value: str) -> bytes | None:
    """A proto JSON ``bytes`` value: standard or URL-safe base64, padded or not."""
    text = value.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except ValueError:
        return None


def _walk_json(node: Any, transform: Callable[[bytes], bytes], *, request: bool = False) -> bool:
    changed = False
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _OPAQUE:
                continue
            if key == _JSON_KEY and isinstance(value, str):
                raw = _json_bytes(value)
                if raw is None and request:
                    # The SDK's conversion would fail on it (HTTP 500).
                    raise InvalidParamsError(message=f"{_JSON_KEY} is not base64")
                if raw is None:
                    continue
                new = base64.b64encode(transform(raw)).decode("ascii")
                if new != value:
                    node[key] = new
                    changed = True
            elif isinstance(value, dict | list):
                changed = _walk_json(value, transform, request=request) or changed
    elif isinstance(node, list):
        for item in node:
            changed = _walk_json(item, transform, request=request) or changed
    return changed


def rest_request_to_sdk(body: Any, *, python_client: bool) -> bool:
    """Rewrite a parsed REST 0.3 request body in place; ``True`` if anything changed. Raises
    ``InvalidParamsError`` for file bytes that are not base64."""
    return _walk_json(body, lambda raw: _sdk_bytes(raw, python_client), request=True)


def rest_response_to_wire(body: Any, *, python_client: bool) -> bool:
    """Rewrite a parsed REST 0.3 answer (or stream event) in place; ``True`` if changed.
    The Python SDK clients keep the SDK's encoding: it is the one they decode."""
    return not python_client and _walk_json(body, _spec_bytes)


def _walk_proto(
    message: Any, transform: Callable[[bytes], bytes], *, request: bool = False
) -> None:
    name = message.DESCRIPTOR.full_name
    if name == "a2a.v1.FilePart":
        if message.WhichOneof("file") == "file_with_bytes":
            message.file_with_bytes = transform(message.file_with_bytes)
        return
    if request and name == "a2a.v1.Part" and message.WhichOneof("part") is None:
        raise InvalidParamsError(message=_EMPTY_PART)
    for field, value in message.ListFields():
        kind = field.message_type
        if kind is None or kind.GetOptions().map_entry or field.name in _OPAQUE:
            continue
        if kind.full_name.startswith("google.protobuf."):
            continue  # Struct, Value, Timestamp: no parts inside
        for item in (value,) if hasattr(value, "DESCRIPTOR") else value:
            _walk_proto(item, transform, request=request)


def proto_request_to_sdk(message: Any, *, python_client: bool) -> None:
    """Rewrite a gRPC 0.3 request message in place for the SDK's conversion; raises
    ``InvalidParamsError`` for a part without content."""
    _walk_proto(message, lambda raw: _sdk_bytes(raw, python_client), request=True)


def proto_response_to_wire(message: Any, *, python_client: bool) -> None:
    """Rewrite a gRPC 0.3 answer (or stream item) in place: file bytes are the file.
    The Python SDK clients keep the SDK's encoding: it is the one they decode."""
    if not python_client:
        _walk_proto(message, _spec_bytes)


async def spec_request(request: Request) -> Request:
    """*request* (REST 0.3) with its file bytes as the SDK decodes them correctly; raises
    ``InvalidParamsError`` for a message part without content."""
    body = await request.body()
    if request.method != "POST" or request.url.path.endswith(":cancel"):
        return request
    try:
        parsed = json.loads(body)
    except ValueError:
        return request  # the SDK answers the parse error
    message = parsed.get("request") if isinstance(parsed, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict) and not any(part.get(k) is not None for k in _PART_KINDS):
            raise InvalidParamsError(message=_EMPTY_PART)
    python = is_python_client(request.headers.get("user-agent"))
    if b'"fileWithBytes"' not in body or not rest_request_to_sdk(parsed, python_client=python):
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


def with_spec_files(endpoint: Endpoint) -> Endpoint:
    """The SDK's 0.3 REST *endpoint*, reading and answering file bytes as the spec says."""

    @rest_error_handler
    async def wrapped(request: Request) -> Response:
        response = await endpoint(await spec_request(request))
        body = bytes(response.body)
        if b'"fileWithBytes"' in body:
            parsed = json.loads(body)
            python = is_python_client(request.headers.get("user-agent"))
            if rest_response_to_wire(parsed, python_client=python):
                response.body = json.dumps(parsed).encode()
                response.headers["content-length"] = str(len(response.body))
        return response

    return wrapped
