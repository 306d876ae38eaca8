"""An A2A error in the shape of the request's binding and protocol version, as a2a-sdk
answers its own: one builder (:func:`error_document`) for refusals on HTTP, whoever refuses
(the request guard, the authentication middleware), and for what the handler raised
(``streams/scrub.py``). gRPC answers the same errors through its servicers'
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
)
from google.protobuf.json_format import ParseError
from starlette.responses import JSONResponse

from apcore_a2a.classify import RequestInfo
from apcore_a2a.upstream.error_answers import correct_error
from apcore_a2a.upstream.error_metadata import string_metadata

#: REST statuses of the refusals the SDK's error table has no row for
_REST_STATUS: dict[type[A2AError], tuple[int, str]] = {InternalError: (503, "UNAVAILABLE")}


def error_document(info: RequestInfo, error: A2AError) -> dict[str, Any]:
    """*error* as a2a-sdk renders it for the request's binding and protocol version; our
    errors get their codes from :func:`~apcore_a2a.upstream.error_answers.correct_error`."""
    if info.binding == "rest":
        if isinstance(error, JSONParseError):  # as the SDK answers a body its parser refused
            return build_rest_error_payload(ParseError(error.message))
        return build_rest_error_payload(error)
    # A JSON-RPC call's version is its method's: read the body (once) before choosing the
    # shape, or a refusal made before anyone read it (401, 403) answers 0.3 in 1.0's.
    request_id = info.request_id
    # The SDK's JSON-RPC builder has no model for some of A2A's own errors (-32700).
    code = JSON_RPC_ERROR_CODE_MAP.get(type(error), -32603)
    detail: dict[str, Any] = {"code": code, "message": error.message}
    if info.version != "0.3":
        detail["data"] = build_error_details(error)
    elif error.data:
        detail["data"] = error.data
    # JSON-RPC 2.0 §5: a request that could not be parsed has no id
    return {"jsonrpc": "2.0", "id": None if code == -32700 else request_id, "error": detail}


def refusal(
    info: RequestInfo,
    error: A2AError,
    status: int | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """*error* answered as :func:`error_document` renders it: JSON-RPC HTTP 200 unless
    *status* says otherwise (1.0's standard errors without ``ErrorInfo``), REST the status
    of spec §5.4 (or *status*)."""
    document = error_document(info, error)
    detail = document["error"]
    rest = info.binding == "rest"
    if rest and type(error) in _REST_STATUS:
        detail["code"], detail["status"] = _REST_STATUS[type(error)]
    if rest and status is not None:
        detail["code"] = status
    standard = isinstance(error, JSONParseError | InvalidRequestError | InternalError)
    if not rest and info.version != "0.3" and standard:
        del detail["data"]
    # The SDK's ErrorInfo.metadata values all text (upstream/error_metadata.py).
    document["error"] = string_metadata(correct_error(detail))
    # As every answer of an A2A call (streams/answers.py): a refusal is one caller's too.
    headers = {"Cache-Control": "no-store", **(headers or {})}
    return JSONResponse(document, document["error"]["code"] if rest else status or 200, headers)
