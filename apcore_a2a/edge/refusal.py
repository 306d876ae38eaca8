"""A refusal on HTTP: an A2A error answered in the shape of the request's binding and
protocol version, as a2a-sdk answers its own, whoever refuses (the request guard, the
authentication middleware). gRPC answers the same errors through its servicers'
``abort_context`` (``upstream/error_answers.py``)."""

from __future__ import annotations

from typing import Any

from a2a.utils.error_handlers import build_error_details, build_rest_error_payload
from a2a.utils.errors import (
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    InternalError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
)
from starlette.responses import JSONResponse

from apcore_a2a.classify import RequestInfo
from apcore_a2a.errors import OwnError
from apcore_a2a.upstream.error_answers import correct_error

#: REST statuses of the refusals the SDK's error table has no row for
_REST_STATUS = {JSONParseError: (400, "INVALID_ARGUMENT"), InternalError: (503, "UNAVAILABLE")}


def refusal(
    info: RequestInfo,
    error: A2AError,
    status: int | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """*error* answered in the shape of the request's binding and protocol version, as
    a2a-sdk answers it: JSON-RPC HTTP 200 unless *status* says otherwise (1.0 with the
    ``ErrorInfo`` data), REST the status of spec §5.4 (or *status*), our errors' codes."""
    if info.binding == "jsonrpc":
        code = error.wire.code if isinstance(error, OwnError) else None
        code = code or JSON_RPC_ERROR_CODE_MAP.get(type(error), -32603)
        detail: dict[str, Any] = {"code": code, "message": error.message}
        if info.version == "0.3":
            if error.data:
                detail["data"] = error.data
        elif not isinstance(error, JSONParseError | InvalidRequestError | InternalError):
            detail["data"] = build_error_details(error)
        # JSON-RPC 2.0 §5: a request that could not be parsed has no id
        request_id = None if code == -32700 else info.request_id
        payload = {"jsonrpc": "2.0", "id": request_id, "error": correct_error(detail)}
        return JSONResponse(payload, status or 200, headers)
    body = build_rest_error_payload(error)
    if type(error) in _REST_STATUS:
        body["error"]["code"], body["error"]["status"] = _REST_STATUS[type(error)]
    if status is not None:
        body["error"]["code"] = status
    body["error"] = correct_error(body["error"])
    return JSONResponse(body, body["error"]["code"], headers)


def not_found(info: RequestInfo) -> JSONResponse:
    """404 for an A2A route that is not served here (under a reserved segment)."""
    return refusal(info, MethodNotFoundError(message="Not Found"), 404)
