"""The typed error an agent's HTTP answer carries, read before a2a-sdk's transports read it.

The transports reduce an error to its message: here it is raised by its JSON-RPC code or
ErrorInfo reason whatever the HTTP status (:func:`refused`), a stream request answered
without a stream raises the error it carries, else that it is no stream
(:func:`not_a_stream`), a ``2xx`` body that is not JSON is an invalid answer
(:func:`not_json`), and so is a JSON-RPC answer that has not exactly one of ``result`` and
``error`` (:func:`one_of_result_and_error`).
"""

from __future__ import annotations

from typing import Any

import httpx

from apcore_a2a._text import message_line
from apcore_a2a.client._bounded import MAX_ERROR_BYTES, json_or_none
from apcore_a2a.client._media import EVENT_STREAM, is_json, shown
from apcore_a2a.client.errors import (
    A2AAuthenticationError,
    A2AClientError,
    A2AConnectionError,
    ContentTypeNotSupportedError,
    InvalidAgentResponseError,
    error_from_details,
    error_from_rpc,
)


def one_of_result_and_error(payload: dict[str, Any], may_be_empty: bool) -> None:
    """Refuse a JSON-RPC answer that has not exactly one of ``result`` and ``error``
    (JSON-RPC 2.0, section 5): an answer of nothing is no empty result, and of both the
    client cannot tell which the agent meant. A ``null`` member beside the other counts as
    absent (serializers write unset members so). *may_be_empty*: an answer of neither is
    taken (an ``event: error`` frame may be a bare error object; a delete's result is
    ``null``, which some servers leave out)."""
    has_result = payload.get("result") is not None or (
        "result" in payload and payload.get("error") is None
    )
    has_error = payload.get("error") is not None
    if has_result and has_error:
        raise InvalidAgentResponseError("agent reply has both 'result' and 'error'")
    if not (has_result or has_error or may_be_empty):
        raise InvalidAgentResponseError("agent reply has neither 'result' nor 'error'")


def oversized(response: httpx.Response, what: str = "an error answer") -> str:
    """What to say of *what* the agent answered past :data:`MAX_ERROR_BYTES`, which the
    client does not read: its size as ``Content-Length`` gives it (not of a compressed body,
    whose length is not what it inflates to) and the cap, so the caller knows why the
    message it carries is not shown."""
    length = response.headers.get("content-length", "").strip()
    compressed = "content-encoding" in response.headers
    if length.isdigit() and int(length) > MAX_ERROR_BYTES and not compressed:
        what += f" of {int(length)} bytes"
    return f"{what} (over the {MAX_ERROR_BYTES // 1024} KiB the client reads)"


def refused(
    response: httpx.Response, content: bytes | bytearray, whole: bool = True
) -> A2AClientError:
    """The typed error of a non-2xx answer: by the JSON-RPC code or ErrorInfo reason it
    names, whatever the status and media type; else a bare 415 is the content type, 401/403
    refuse the caller, anything else is the connection's. *content* is its body, cut at
    :data:`MAX_ERROR_BYTES` unless *whole*: then its size is what it says."""
    status, body = response.status_code, json_or_none(content) if whole else None
    error = body.get("error", body) if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    if status not in (401, 403) and error:
        code = error.get("code")
        rpc = isinstance(code, int) and code < 0  # else a google.rpc.Status (HTTP code)
        typed = error_from_rpc(error) if rpc else error_from_details(error)
        if typed is not None:
            return typed
    # What the refusal says, in one line: the error's message, else a short plain body.
    said = error.get("message") or error.get("detail") or error.get("title")
    text = content.decode(errors="replace").strip()
    if not whole:
        said = oversized(response)
    elif not isinstance(said, str):
        said = text[:200] if text and text[0] not in "{[<" else ""
    said = message_line(said)[:300]
    if status == 415:
        return ContentTypeNotSupportedError(said or "the agent does not accept the content type")
    cls = A2AAuthenticationError if status in (401, 403) else A2AConnectionError
    return cls(
        f"HTTP {status} from {response.url}" + (f": {said}" if said else ""), status_code=status
    )


def not_a_stream(
    response: httpx.Response, binding: str, content: bytes | bytearray, whole: bool = True
) -> A2AClientError:
    """The error of a 2xx answer to a stream request that is not ``text/event-stream``
    (A2A 1.0.1 §9.4.2, §11.7): the typed error it carries, as agents refuse a stream before
    it starts (JSON: a JSON-RPC error object; REST: a ``google.rpc.Status`` naming its
    reason), else :class:`InvalidAgentResponseError` naming what came instead. A result is
    refused too, not read as the one event: an agent that answers a stream so did not stream
    (a server taking the call for ``SendMessage``, a proxy), which the caller is told."""
    header = response.headers.get("content-type")
    payload = json_or_none(content) if whole and is_json(header) else None
    error = payload.get("error") if isinstance(payload, dict) else None
    if binding == "JSONRPC" and isinstance(payload, dict) and error is not None:
        one_of_result_and_error(payload, False)
        return error_from_rpc(error)
    typed = error_from_details(error) if binding != "JSONRPC" and isinstance(error, dict) else None
    if typed is not None:
        return typed
    answer = shown(header)
    if not whole:
        answer = oversized(response, f"HTTP {response.status_code} and {answer}")
    empty = "" if content.strip() else " (an empty body)"
    return InvalidAgentResponseError(
        f"the agent answered a stream request with {answer}, not {EVENT_STREAM}{empty}"
    )


def not_json(response: httpx.Response) -> InvalidAgentResponseError:
    """The error of a 2xx answer with a body that is not JSON by its media type."""
    return InvalidAgentResponseError(
        f"the agent answered {response.url} with {shown(response.headers.get('content-type'))}, "
        "not JSON (application/json)"
    )
