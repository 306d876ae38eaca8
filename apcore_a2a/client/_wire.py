"""A2A calls through a2a-sdk's client transports, with what the client documents on top.

:func:`on_response` (an httpx hook) sees every HTTP reply before the transport does: errors
keep the agent's code (also apcore-a2a's -32090..), message and ``data``/``details``, which
the transports reduce, and a non-2xx answer is read by its ErrorInfo reason or JSON-RPC
code whatever its status (1.0.1's 400s and 1.0.0-era 409/415/502 alike). SSE bodies are read
with ``httpx-sse`` and handed to the transport one event at a time, so the id of the event
the transport yields (``Last-Event-ID`` resume), which the SDK drops, is the one last read.
The result as received also keeps what protobuf cannot hold (a 0.3 ``final``, push-config
delivery status, a card as served). Every answer passes ``upstream.utc_timestamps`` before
the SDK parses it.

With OpenTelemetry's API installed, each call runs in a CLIENT span named after the A2A 1.0
method, with the draft OpenTelemetry A2A attributes, and sends the span's ``traceparent``.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from a2a.client.errors import A2AClientTimeoutError
from a2a.utils.errors import A2AError as SDKError
from google.protobuf.json_format import MessageToDict, ParseError
from httpx_sse import EventSource

from apcore_a2a.client.errors import (
    A2AAuthenticationError,
    A2AClientError,
    A2AConnectionError,
    A2ARemoteError,
    A2AServerError,
    ContentTypeNotSupportedError,
    InvalidAgentResponseError,
    UnsupportedOperationError,
    error_from_details,
    error_from_rpc,
)
from apcore_a2a.upstream.utc_timestamps import utc_timestamps


@dataclass
class Call:
    """One A2A call in flight: the result (JSON-RPC ``result`` or REST body) and SSE id of
    the reply or stream event last received."""

    binding: str = "JSONRPC"
    wire: Any = None
    event_id: str | None = None


_current: ContextVar[Call | None] = ContextVar("apcore_a2a_client_call", default=None)


@contextlib.contextmanager
def current(call: Call) -> Iterator[None]:
    token = _current.set(call)
    try:
        yield
    finally:
        _current.reset(token)


def _payload(content: bytes | str) -> Any:
    try:
        return json.loads(content)
    except ValueError as exc:
        raise InvalidAgentResponseError(f"agent returned invalid JSON: {content[:200]!r}") from exc


def _result(payload: Any, call: Call) -> Any:
    if call.binding != "JSONRPC":
        return payload
    if not isinstance(payload, dict):
        raise InvalidAgentResponseError(f"agent returned a non-object reply: {payload!r:.200}")
    if payload.get("error") is not None:
        raise error_from_rpc(payload["error"])
    if "result" not in payload and payload.get("jsonrpc") != "2.0":
        raise InvalidAgentResponseError("agent reply has neither 'result' nor 'error'")
    return payload.get("result")


def _error_body(content: bytes | str) -> dict[str, Any] | None:
    """The error object of a failed answer: ``google.rpc.Status`` (1.0, apcore-a2a's 0.3
    routes), a JSON-RPC ``error``, a 0.3 REST ``{type, message}`` or an RFC 9457 problem."""
    with contextlib.suppress(ValueError):
        body = json.loads(content)
        error = body.get("error", body) if isinstance(body, dict) else None
        return error if isinstance(error, dict) else None
    return None


def _rest_error(content: bytes | str) -> A2ARemoteError | None:
    error = _error_body(content)
    if error is None:
        return None
    message = str(error.get("message") or "")
    return error_from_details(message, error.get("details"), error.get("type"))


def _said(content: bytes, error: dict[str, Any] | None) -> str:
    """What a refusal says, in one line: the error's message, else a short plain body."""
    said = error and (error.get("message") or error.get("detail") or error.get("title"))
    if isinstance(said, str):
        return " ".join(said.split())[:300]
    text = content.decode(errors="replace").strip()
    return " ".join(text.split())[:200] if text and text[0] not in "{[<" else ""


def _failed(response: httpx.Response, content: bytes) -> A2AClientError:
    """The typed error of a non-2xx answer. By ErrorInfo reason (1.0.1: 400, 404, 500 ...;
    1.0.0-era agents: 409, 415, 502 ...) or JSON-RPC code, whatever the status; a bare
    415 is the content type; 401/403 refuse the caller; anything else is the connection's."""
    status = response.status_code
    error = _error_body(content)
    if status not in (401, 403) and error is not None:
        typed = (
            error_from_rpc(error)
            if isinstance(error.get("code"), int) and error["code"] < 0
            else _rest_error(content)
        )
        if typed is not None:
            return typed
    said = _said(content, error)
    if status == 415:
        return ContentTypeNotSupportedError(said or "the agent does not accept the content type")
    cls = A2AAuthenticationError if status in (401, 403) else A2AConnectionError
    return cls(
        f"HTTP {status} from {response.url}" + (f": {said}" if said else ""), status_code=status
    )


async def on_response(response: httpx.Response) -> None:
    """Raise a failed A2A call's typed error; tap its body (see the module docstring)."""
    call = _current.get()
    if call is None:  # not an A2A call (card, keys)
        return
    # Read through a response of our own (the content decoded), so the SDK reads the body
    # we hand it: each SSE event on its own, the answer's timestamps read as UTC.
    body = httpx.Response(response.status_code, headers=response.headers, stream=response.stream)
    response.headers.pop("content-encoding", None)
    if not response.is_success:
        raise _failed(response, await body.aread())
    if "text/event-stream" in response.headers.get("content-type", ""):
        response.stream = _EventTap(body, call)
        return
    content = await body.aread()
    if not content.strip():
        response.stream = httpx.ByteStream(content)
        return
    payload = _payload(content)
    fixed = utc_timestamps(payload, content)
    call.wire = _result(fixed, call)
    response.stream = httpx.ByteStream(content if fixed is payload else json.dumps(fixed).encode())


class _EventTap(httpx.AsyncByteStream):
    def __init__(self, body: httpx.Response, call: Call) -> None:
        self._body, self._call = body, call

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for sse in EventSource(self._body).aiter_sse():
            if not sse.data:
                continue
            payload = _payload(sse.data)
            if sse.event == "error":
                if self._call.binding != "JSONRPC":
                    raise _rest_error(sse.data) or A2AServerError(sse.data[:300])
                if not (isinstance(payload, dict) and "error" in payload):
                    raise error_from_rpc(payload)
            fixed = utc_timestamps(payload, sse.data.encode())
            self._call.wire = _result(fixed, self._call)
            self._call.event_id = sse.id or self._call.event_id
            # The event as received, unless it spans lines or was corrected.
            unchanged = fixed is payload and "\n" not in sse.data
            data = sse.data if unchanged else json.dumps(fixed)
            yield b"data: " + data.encode() + b"\n\n"

    async def aclose(self) -> None:
        await self._body.aclose()


def _grpc_error(error: Any, method: str, url: str) -> A2AClientError:
    from a2a.utils.grpc_status import status_from_call
    from google.rpc import error_details_pb2  # noqa: F401  (registers ErrorInfo for MessageToDict)

    status = status_from_call(error)
    details = [MessageToDict(d) for d in status.details] if status is not None else []
    message, code = str(error.details() or ""), error.code().name
    name, _, text = message.partition(": ")  # 0.3 answers "TaskNotFoundError: Task not found"
    typed = error_from_details(message, details) or error_from_details(text, None, name)
    if typed is not None:
        return typed
    if code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
        return A2AAuthenticationError(f"gRPC {code} from {url}: {message}")
    if code == "UNAVAILABLE":
        return A2AConnectionError(f"{method} to {url} failed: {message}")
    return A2AServerError(f"gRPC {code} from {url}: {message}", data=details or None)


@contextlib.contextmanager
def translated(method: str, url: str) -> Iterator[None]:
    """SDK transport failures → the client's typed errors (ours pass through)."""
    try:
        yield
    except A2AClientError:
        raise
    except A2AClientTimeoutError as exc:
        raise A2AConnectionError(f"{method} to {url} timed out") from exc
    except NotImplementedError as exc:  # what the SDK's 0.3 transports do not offer
        raise UnsupportedOperationError(f"{method} over this binding: {exc}") from exc
    except SDKError as exc:
        grpc = sys.modules.get("grpc.aio")
        if grpc is not None and isinstance(exc.__cause__, grpc.AioRpcError):
            raise _grpc_error(exc.__cause__, method, url) from exc
        if isinstance(exc.__cause__, httpx.TransportError):
            raise A2AConnectionError(f"{method} to {url} failed: {exc.__cause__}") from exc
        raise InvalidAgentResponseError(f"agent returned an invalid reply: {exc}") from exc
    except (ValueError, TypeError, KeyError, AttributeError, ParseError) as exc:
        raise InvalidAgentResponseError(
            f"agent returned an invalid {method} result: {exc}"[:300]
        ) from exc


_WRAPPERS = frozenset({"task", "message", "statusUpdate", "artifactUpdate"})


def _request_attributes(
    method: str, version: str, url: str, params: Mapping[str, Any]
) -> dict[str, Any]:
    parts = urlsplit(url if "://" in url else "//" + url)  # gRPC: host:port
    message = params.get("message") or {}
    found = {
        "a2a.method.name": method,
        "a2a.protocol.version": version,
        "a2a.message.id": message.get("messageId"),
        "a2a.task.id": message.get("taskId") or params.get("taskId") or params.get("id"),
        "server.address": parts.hostname,
        "server.port": parts.hostname and (parts.port or (443 if parts.scheme == "https" else 80)),
    }
    return {k: v for k, v in found.items() if v}


def _answer_attributes(result: Mapping[str, Any]) -> dict[str, Any]:
    """Task, conversation and state of a result or stream event (as 1.0 JSON)."""
    if len(result) == 1 and next(iter(result)) in _WRAPPERS:
        result = next(iter(result.values()))
    found = {
        "a2a.task.id": result.get("taskId") or ("status" in result and result.get("id")),
        "gen_ai.conversation.id": result.get("contextId"),
        "a2a.task.state": (result.get("status") or {}).get("state"),
    }
    return {k: v for k, v in found.items() if v}


@contextlib.contextmanager
def a2a_call(
    method: str,
    version: str,
    url: str,
    params: Mapping[str, Any],
    headers: MutableMapping[str, str],
) -> Iterator[Callable[[Mapping[str, Any]], None]]:
    """The CLIENT span of one call; adds ``traceparent`` to *headers*; yields what to call
    with each result (or stream event) as 1.0 JSON."""
    try:
        from opentelemetry import propagate, trace
    except ImportError:
        yield lambda _result: None
        return
    attributes = _request_attributes(method, version, url, params)
    # Not made current: a stream's span stays open while the caller runs between events.
    span = trace.get_tracer("apcore_a2a.client").start_span(
        method, kind=trace.SpanKind.CLIENT, attributes=attributes
    )
    propagate.inject(headers, context=trace.set_span_in_context(span))

    def seen(result: Mapping[str, Any]) -> None:
        if span.is_recording():
            span.set_attributes(_answer_attributes(result))

    try:
        yield seen
    except Exception as exc:
        code = getattr(exc, "code", None) or getattr(exc, "status_code", None)
        error = str(code) if code else type(exc).__name__
        span.set_attribute("error.type", error)
        span.set_status(trace.Status(trace.StatusCode.ERROR, error))
        raise
    finally:
        span.end()
