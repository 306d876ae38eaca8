"""What an agent's answers say before a2a-sdk's client transports read them.

The transports reduce an error to its message; :func:`on_response` (an httpx hook) raises
it first with the agent's code, message and ``data``/``details``, by its ErrorInfo reason or
JSON-RPC code whatever the HTTP status. It passes every answer through
``upstream.utc_timestamps`` and keeps the result as received in :attr:`Call.wire` for what
protobuf cannot hold (a 0.3 ``final``, a card as served). An SSE
body is handed to the transport one event at a time, so the id the SDK drops is the one
last read (``Last-Event-ID`` resumes; docs/benchmarks.md has its cost). A stream call
answered with anything but SSE raises the error it carries, else that it is no stream
(:func:`not_a_stream`): the transports would read it as at most one event. An answer's
media type is parsed (``_media.py``), never searched for: a ``2xx`` body that is neither
JSON nor SSE is an invalid answer.

An agent is not trusted with the client's memory: an answer, and each stream event, is read
up to :data:`MAX_ANSWER_BYTES` (decoded: a compressed body counts inflated; gRPC: each
message, the channel's receive limit) and a deeper JSON
than Python can parse is an invalid answer, not a ``RecursionError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx
from a2a.client.errors import A2AClientTimeoutError
from a2a.utils.errors import A2AError as SDKError
from google.protobuf.json_format import MessageToDict, ParseError
from google.protobuf.message import DecodeError
from httpx_sse import EventSource

from apcore_a2a._text import message_line
from apcore_a2a.client._media import EVENT_STREAM, event_stream, is_json, shown
from apcore_a2a.client._shapes import check_event_03
from apcore_a2a.client.errors import (
    A2AAuthenticationError,
    A2AClientError,
    A2AConnectionError,
    A2AServerError,
    ContentTypeNotSupportedError,
    InvalidAgentResponseError,
    UnsupportedOperationError,
    error_from_details,
    error_from_rpc,
)
from apcore_a2a.upstream.utc_timestamps import utc_timestamps

#: The largest answer the client reads, decoded: a result, or one event of a stream.
MAX_ANSWER_BYTES = 64 * 1024 * 1024
#: What of an error answer is read for the one line that says what went wrong.
MAX_ERROR_BYTES = 64 * 1024


async def read_at_most(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """Up to *limit* bytes of *response*'s decoded body, and whether that is all of it (a
    larger body is not read further: the response is closed)."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            await response.aclose()
            del body[limit:]
            return bytes(body), False
    return bytes(body), True


def parse_json(content: str | bytes) -> tuple[Any, str | None]:
    """*content* as JSON and ``None``, else ``None`` and why it is not (too deep to parse
    is a ``RecursionError``): the reason, not the parser's error, whose ``doc`` keeps the
    whole text (up to :data:`MAX_ANSWER_BYTES`) for as long as an error chained to it is."""
    try:
        return json.loads(content), None
    except (ValueError, RecursionError) as exc:
        return None, str(exc)


def json_or_none(content: bytes) -> Any:
    """*content* as JSON, or ``None`` when it is not."""
    return parse_json(content)[0]


async def get_at_most(
    http: httpx.AsyncClient, url: str, limit: int, headers: Mapping[str, str] | None = None
) -> tuple[httpx.Response, bytes, bool]:
    """GET *url*, the whole answer within *http*'s read timeout (not each read): the
    response, up to *limit* bytes of its decoded body (of an error status, up to
    :data:`MAX_ERROR_BYTES`) and whether that is all of it. A timeout or a failed
    connection raises :class:`A2AConnectionError`; a body that is not in its content
    encoding, ``httpx.DecodingError``."""
    try:
        async with (
            asyncio.timeout(http.timeout.read),
            http.stream("GET", url, headers=headers) as response,
        ):
            limit = limit if response.is_success else min(limit, MAX_ERROR_BYTES)
            return response, *await read_at_most(response, limit)
    except (httpx.TimeoutException, TimeoutError) as exc:
        raise A2AConnectionError(f"timed out fetching {url}") from exc
    except httpx.TransportError as exc:
        raise A2AConnectionError(f"cannot reach {url}: {exc}") from exc


def _too_large(what: str) -> InvalidAgentResponseError:
    return InvalidAgentResponseError(f"{what} is larger than {MAX_ANSWER_BYTES} bytes")


@dataclass
class Call:
    """One A2A call in flight: its binding, and the result (JSON-RPC ``result`` or REST
    body) and SSE id of the answer or stream event last received."""

    binding: str = "JSONRPC"
    version: str = "1.0"
    wire: Any = None
    event_id: str | None = None
    #: the stream event last received has the id of the one before (or of the
    #: ``Last-Event-ID`` it resumed from): the agent sent it again
    repeated: bool = False
    #: the call's result is nothing (a delete): an answer may leave out its ``null``
    #: ``result``, as a2a-sdk's own 0.3 server does (it writes no ``None`` member)
    nothing_expected: bool = False
    #: the call is a stream (``SendStreamingMessage``, ``SubscribeToTask``): a 2xx
    #: answer is an SSE stream or no answer (:func:`not_a_stream`)
    stream: bool = False

    def read(self, text: str | bytes, *, error: bool = False) -> Any:
        """Keep the result of *text* (an answer or SSE event) in :attr:`wire`; return what
        the transport should read instead, or ``None`` for *text* itself. Raises the typed
        error it carries (*error*: an ``event: error`` frame)."""
        payload, problem = parse_json(text)
        if problem is not None:
            raise InvalidAgentResponseError(
                f"agent returned invalid JSON ({problem}): {text[:200]!r}"
            )
        if self.binding == "JSONRPC":
            if not isinstance(payload, dict):
                raise InvalidAgentResponseError(f"agent returned a non-object reply: {text!r:.200}")
            _one_of_result_and_error(payload, error or self.nothing_expected)
            if error or payload.get("error") is not None:
                raise error_from_rpc(payload.get("error", payload))  # or a bare error object
        elif error:
            # A 1.0 REST error is a google.rpc.Status in an ``error`` member (as its
            # non-2xx answers); a 0.3 agent's is bare.
            inner = payload.get("error", payload) if isinstance(payload, dict) else None
            typed = error_from_details(inner) if isinstance(inner, dict) else None
            raise typed or A2AServerError(f"agent sent an error event: {text!r:.300}")
        fixed = utc_timestamps(payload, text)
        result = fixed.get("result") if self.binding == "JSONRPC" else fixed
        if self.stream and self.binding == "JSONRPC" and self.version == "0.3":
            check_event_03(result)
        self.wire = None if _whole_in_proto(result) else result
        return None if fixed is payload else fixed


def _one_of_result_and_error(payload: dict[str, Any], may_be_empty: bool) -> None:
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


#: 1.0 members, and 0.3 kinds, of a result that protobuf holds whole
_WHOLE_MEMBERS = frozenset({"task", "message", "artifactUpdate", "tasks"})
_WHOLE_KINDS = frozenset({"task", "message", "artifact-update"})


def _whole_in_proto(result: Any) -> bool:
    """Whether *result* (as received) is a task, message, artifact update or page of tasks,
    of which :attr:`Call.wire` has nothing to add: not keeping it spares holding a large
    answer (an artifact of many MB) twice while the SDK parses its own copy."""
    if not isinstance(result, dict):
        return False
    if result.get("kind") in _WHOLE_KINDS or not _WHOLE_MEMBERS.isdisjoint(result):
        return True
    return isinstance(result.get("status"), dict) and "id" in result  # a 1.0 task, bare


_current: ContextVar[Call | None] = ContextVar("apcore_a2a_client_call", default=None)


@contextlib.contextmanager
def current(call: Call) -> Iterator[None]:
    """Make *call* the one whose answers :func:`on_response` reads (in this context)."""
    token = _current.set(call)
    try:
        yield
    finally:
        _current.reset(token)


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


def refused(response: httpx.Response, content: bytes, whole: bool = True) -> A2AClientError:
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
    response: httpx.Response, binding: str, content: bytes, whole: bool = True
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
        _one_of_result_and_error(payload, False)
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


async def on_response(response: httpx.Response) -> None:
    """Raise a failed A2A call's typed error; tap its body (see the module docstring)."""
    call = _current.get()
    if call is None:  # not an A2A call (card, keys)
        return
    # Read through a response of our own (the content decoded), so the SDK reads the body
    # we hand it: each SSE event on its own, the answer's timestamps read as UTC.
    body = httpx.Response(response.status_code, headers=response.headers, stream=response.stream)
    if not response.is_success:
        raise refused(response, *await read_at_most(body, MAX_ERROR_BYTES))
    stream_type = event_stream(response.headers.get("content-type"))
    if call.stream and stream_type is None:  # a2a-sdk would read it as one event, or none
        raise not_a_stream(response, call.binding, *await read_at_most(body, MAX_ERROR_BYTES))
    response.headers.pop("content-encoding", None)  # the SDK reads the body decoded, ours
    if stream_type is not None:
        response.headers["content-type"] = stream_type
        response.stream = _EventTap(body, call, response.url, stream_type)
        return
    header = response.headers.get("content-type")
    if not is_json(header):  # nothing to read (a delete's answer), or no A2A answer
        if (await read_at_most(body, MAX_ERROR_BYTES))[0].strip():
            raise not_json(response)
        response.stream = httpx.ByteStream(b"")
        return
    content, whole = await read_at_most(body, MAX_ANSWER_BYTES)
    if not whole:
        raise _too_large(f"the answer of {response.url}")
    fixed = call.read(content) if content.strip() else None
    response.stream = httpx.ByteStream(content if fixed is None else json.dumps(fixed).encode())


#: the end of an SSE event: a blank line after any of the line endings SSE allows
_BLANK_LINES = (b"\n\n", b"\r\r", b"\n\r\n", b"\r\n\n")


async def _events(body: httpx.Response, url: httpx.URL) -> AsyncIterator[bytes]:
    """*body*'s decoded bytes, refused once one event (or line) runs past the limit: the
    SSE reader would otherwise buffer it whole, however long."""
    pending = 0  # bytes since the last blank line
    tail = b""  # the end of the previous chunk, for a blank line split between chunks
    async for chunk in body.aiter_bytes():
        seen = tail + chunk
        ends = [seen.rfind(blank) + len(blank) for blank in _BLANK_LINES if blank in seen]
        pending = len(seen) - max(ends) if ends else pending + len(chunk)
        if pending > MAX_ANSWER_BYTES:
            raise _too_large(f"an event of the stream from {url}")
        tail = seen[-2:]
        yield chunk


class _EventTap(httpx.AsyncByteStream):
    def __init__(self, body: httpx.Response, call: Call, url: httpx.URL, media: str) -> None:
        self._body, self._call, self._url, self._media = body, call, url, media

    async def __aiter__(self) -> AsyncIterator[bytes]:
        media_type = {"content-type": self._media}  # its charset
        events = httpx.Response(200, headers=media_type, content=_events(self._body, self._url))
        async for sse in EventSource(events).aiter_sse():
            if not sse.data:
                continue
            fixed = self._call.read(sse.data, error=sse.event == "error")
            self._call.repeated = bool(sse.id) and sse.id == self._call.event_id
            self._call.event_id = sse.id or self._call.event_id
            # One line: JSON spread over data lines is the same value with spaces.
            data = sse.data.replace("\n", " ") if fixed is None else json.dumps(fixed)
            yield b"data: "  # in three pieces: not one more copy of a large event
            yield data.encode()
            yield b"\n\n"

    async def aclose(self) -> None:
        await self._body.aclose()


def _grpc_details(error: Any) -> list[dict[str, Any]]:
    """The readable details of *error*'s ``google.rpc.Status``: none when the agent's status
    is no ``Status`` or contradicts the call's own code and message, and not one of a type
    no one registered or that is corrupt (the call's code and message still say what failed).
    """
    from a2a.utils.grpc_status import status_from_call
    from google.rpc import error_details_pb2  # noqa: F401  (registers ErrorInfo for MessageToDict)

    try:
        status = status_from_call(error)
    except (DecodeError, ValueError):
        return []
    details = []
    for detail in status.details if status is not None else ():
        with contextlib.suppress(DecodeError, TypeError, ValueError):
            details.append(MessageToDict(detail))
    return details


def _grpc_error(error: Any, method: str, url: str) -> A2AClientError:
    details = _grpc_details(error)
    message, code = str(error.details() or ""), error.code().name
    name, _, text = message.partition(": ")  # 0.3 answers "TaskNotFoundError: Task not found"
    typed = error_from_details({"message": message, "details": details}) or error_from_details(
        {"message": text}, name
    )
    if typed is not None:
        return typed
    if code == "RESOURCE_EXHAUSTED" and "CLIENT: Received message larger than max" in message:
        return _too_large(f"an answer of {url}")  # gRPC's words for the limit the client set
    if code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
        return A2AAuthenticationError(f"gRPC {code} from {url}: {message}")
    if code == "UNAVAILABLE":
        return A2AConnectionError(f"{method} to {url} failed: {message}")
    return A2AServerError(f"gRPC {code} from {url}: {message}", data=details or None)


def _from_grpc(exc: BaseException, method: str, url: str) -> A2AClientError | None:
    """The typed error of the failed gRPC call behind *exc* (an SDK error raised from it, or
    what the SDK raised while reading its error details); ``None`` for another failure."""
    grpc = sys.modules.get("grpc.aio")
    for behind in (exc.__cause__, exc.__context__):
        if grpc is not None and isinstance(behind, grpc.AioRpcError):
            return _grpc_error(behind, method, url)
    return None


def _alone(error: A2AClientError) -> NoReturn:
    """Raise *error* with nothing chained. ``from None`` only hides the exception being
    handled: it stays the error's ``__context__`` (a generator's too, as ``translated``
    is, raised past its ``except``), and the SDK's error and gRPC's behind it hold the
    agent's whole status message (up to 16 KiB) for whatever walks the chain."""
    try:
        raise error from None
    finally:
        error.__context__ = None


@contextlib.contextmanager
def translated(method: str, url: str) -> Iterator[None]:
    """SDK transport failures → the client's typed errors (ours pass through)."""
    typed: A2AClientError | None = None
    try:
        yield
    except A2AClientError:
        raise
    except (A2AClientTimeoutError, TimeoutError) as exc:  # TimeoutError: the whole call's
        raise A2AConnectionError(f"{method} to {url} timed out") from exc
    except NotImplementedError as exc:  # what the SDK's 0.3 transports do not offer
        raise UnsupportedOperationError(f"{method} over this binding: {exc}") from exc
    except SDKError as exc:
        typed = _from_grpc(exc, method, url)  # ours says it all: raised alone, below
        if typed is None and isinstance(exc.__cause__, httpx.TransportError):
            raise A2AConnectionError(f"{method} to {url} failed: {exc.__cause__}") from exc
        if typed is None:
            raise InvalidAgentResponseError(f"agent returned an invalid reply: {exc}") from exc
    except (
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
        ParseError,
        RecursionError,
        DecodeError,
    ) as exc:
        typed = _from_grpc(exc, method, url)  # the SDK could not read the agent's error
        if typed is None:
            said = message_line(str(exc))  # pydantic's run to several lines
            raise InvalidAgentResponseError(
                f"agent returned an invalid {method} result: {said}"[:300]
            ) from exc
    if typed is not None:
        _alone(typed)
