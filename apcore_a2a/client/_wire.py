"""What an agent's HTTP answers say before a2a-sdk's client transports read them.

The transports reduce an error to its message: :func:`on_response` (an httpx hook) raises
it first, typed by its JSON-RPC code or ErrorInfo reason whatever the HTTP status
(:func:`refused`), with the agent's code, message and ``data``/``details``. A stream request
answered without a stream raises the error it carries, else that it is no stream
(:func:`not_a_stream`); a ``2xx`` body that is not JSON is an invalid answer, and so is a
JSON-RPC answer that has not exactly one of ``result`` and ``error``
(:func:`one_of_result_and_error`). The hook passes every answer through
``upstream.utc_timestamps`` and keeps the result as received in :attr:`Call.wire` for what
protobuf cannot hold (a 0.3 ``final``, a card as served). An SSE body is handed to the
transport one event at a time, so the id the SDK drops is the one last read
(``Last-Event-ID`` resumes; docs/benchmarks.md has its cost). An answer, and each event, is
read up to ``MAX_ANSWER_BYTES`` (``_bounded.py``).

An answer's ``Content-Type`` is parsed, never matched as a substring: a media type is
``type "/" subtype`` then ``; name=value`` parameters, both names case-insensitive (RFC 9110
§8.3.1). Searched for as a substring, ``application/jsonx``, ``application/json-seq`` or
``text/html; note=application/json`` passed as JSON and ``text/event-streamx`` as a stream.
JSON is ``application/json`` or a type with the ``+json`` structured suffix (RFC 6839
§3.1), such as ``application/a2a+json``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import EventSource

from apcore_a2a._text import message_line
from apcore_a2a.client._bounded import (
    MAX_ANSWER_BYTES,
    MAX_ERROR_BYTES,
    decoded,
    parse_json,
    read_at_most,
    too_large,
)
from apcore_a2a.client._shapes import sendable
from apcore_a2a.client.errors import (
    A2AAuthenticationError,
    A2AClientError,
    A2AConnectionError,
    A2AServerError,
    ContentTypeNotSupportedError,
    InvalidAgentResponseError,
    error_from_details,
    error_from_rpc,
)
from apcore_a2a.upstream.proxy_targets import bracketed
from apcore_a2a.upstream.utc_timestamps import utc_timestamps

#: an RFC 9110 token: what a type and a subtype are made of
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")

EVENT_STREAM = "text/event-stream"


def essence(header: str | None) -> str | None:
    """The ``type/subtype`` of a ``Content-Type`` header, lowercase; ``None`` when the
    header is absent or is no media type."""
    if header is None:
        return None
    kind = header.partition(";")[0].strip()
    main, slash, sub = kind.partition("/")
    if not slash or not _TOKEN.fullmatch(main) or not _TOKEN.fullmatch(sub):
        return None
    return kind.lower()


def is_json(header: str | None) -> bool:
    """Whether *header* names JSON: ``application/json`` or ``application/*+json``."""
    main, _, sub = (essence(header) or "").partition("/")
    if main != "application":
        return False
    return sub == "json" or (sub.endswith("+json") and sub != "+json")


def event_stream(header: str | None) -> str | None:
    """*header* with its type written ``text/event-stream`` (its parameters, the charset
    among them, kept) when it names an SSE stream, else ``None``. The spelling is the one
    a2a-sdk and httpx-sse look for (as a substring, case-sensitive), so a stream an agent
    names ``Text/Event-Stream`` is read as one."""
    if header is None or essence(header) != EVENT_STREAM:
        return None
    _, semicolon, parameters = header.partition(";")
    return EVENT_STREAM + semicolon + parameters


def shown(header: str | None) -> str:
    """*header* for a message: one line of at most 100 characters, its spaces as sent."""
    return message_line(header or "")[:100] or "no content type"


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
    status, body = response.status_code, parse_json(content)[0] if whole else None
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
    payload = parse_json(content)[0] if whole and is_json(header) else None
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


#: the events of an A2A 0.3 stream: its ``kind`` is one of these, and required
_KINDS_03 = frozenset({"task", "message", "status-update", "artifact-update"})


def check_event_03(result: Any) -> None:
    """Refuse a 0.3 JSON-RPC stream event's *result* that a2a-sdk 1.3's 0.3 transport would
    drop unseen: no object, or of a kind A2A 0.3 does not define (the SDK infers a missing
    ``kind`` of a task, message or status update, not of an artifact update). A 0.3
    ``SendStreamingMessageResponse`` result is one of four objects, each with its ``kind``,
    so only a malformed event is refused; dropped, it was a gap in the stream no one saw."""
    kind = result.get("kind") if isinstance(result, dict) else None
    if isinstance(result, dict) and not kind:  # as the SDK infers it
        if "taskId" in result and "final" in result:
            kind = "status-update"
        elif "messageId" in result:
            kind = "message"
        elif "id" in result:
            kind = "task"
    if isinstance(kind, str) and kind in _KINDS_03:
        return
    if not isinstance(result, dict):
        said = "that is no JSON object"
    elif kind:
        said = f"of kind {json.dumps(kind)[:100]}"
    else:
        said = "with no kind"
    raise InvalidAgentResponseError(
        f"agent sent a stream event {said}, which is no A2A 0.3 task, message, "
        "status-update or artifact-update"
    )


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

    def read(self, text: str | bytes | bytearray, *, error: bool = False) -> Any:
        """Keep the result of *text* (an answer or SSE event) in :attr:`wire`; return what
        the transport should read instead, or ``None`` for *text* itself. Raises the typed
        error it carries (*error*: an ``event: error`` frame)."""
        payload, problem = parse_json(text)
        if problem is not None:
            raise InvalidAgentResponseError(
                f"agent returned invalid JSON ({problem}): {_start(text, 200)}"
            )
        if self.binding == "JSONRPC":
            if not isinstance(payload, dict):
                raise InvalidAgentResponseError(
                    f"agent returned a non-object reply: {_start(text, 200)}"
                )
            one_of_result_and_error(payload, error or self.nothing_expected)
            if error or payload.get("error") is not None:
                raise error_from_rpc(payload.get("error", payload))  # or a bare error object
        elif error:
            # A 1.0 REST error is a google.rpc.Status in an ``error`` member (as its
            # non-2xx answers); a 0.3 agent's is bare.
            inner = payload.get("error", payload) if isinstance(payload, dict) else None
            typed = error_from_details(inner) if isinstance(inner, dict) else None
            raise typed or A2AServerError(f"agent sent an error event: {_start(text, 300)}")
        fixed = utc_timestamps(payload, text)
        result = fixed.get("result") if self.binding == "JSONRPC" else fixed
        if self.stream and self.binding == "JSONRPC" and self.version == "0.3":
            check_event_03(result)
        self.wire = None if _whole_in_proto(result) else result
        return None if fixed is payload else fixed


def _start(text: str | bytes | bytearray, chars: int) -> str:
    """The start of *text* as quoted in an error: a body read into a ``bytearray`` reads
    as bytes, and not the whole of it is quoted first (a body of 64 MiB)."""
    start = text[:chars]
    return repr(bytes(start) if isinstance(start, bytearray) else start)[:chars]


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


async def on_request(request: httpx.Request) -> None:
    """Name an agent at an IPv6 literal to an egress proxy in brackets (httpx reads
    ``HTTP_PROXY``/``HTTPS_PROXY``; ``upstream/proxy_targets.py``)."""
    bracketed(request)


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
            raise InvalidAgentResponseError(
                f"the agent answered {response.url} with {shown(header)}, "
                "not JSON (application/json)"
            )
        response.stream = httpx.ByteStream(b"")
        return
    content, whole = await read_at_most(body, MAX_ANSWER_BYTES)
    if not whole:
        raise too_large(f"the answer of {response.url}")
    fixed = call.read(content) if content and not content.isspace() else None
    # The SDK's transport joins what it is handed into bytes, a copy unless it is bytes.
    response.stream = httpx.ByteStream(
        bytes(content) if fixed is None else json.dumps(fixed).encode()
    )


#: the client's httpx hooks: every request and answer, A2A call or not
HOOKS: dict[str, list[Callable[..., Any]]] = {
    "request": [on_request],
    "response": [on_response],
}


#: the end of an SSE event: a blank line after any of the line endings SSE allows
_BLANK_LINES = (b"\n\n", b"\r\r", b"\n\r\n", b"\r\n\n")


#: what the SSE reader holds per line of an event beyond its bytes (a string of its own:
#: a data line of 9 bytes held 62)
_LINE_COST = 64


def _lines(data: bytes, start: int = 0) -> int:
    """Line breaks in *data* from *start* (CR LF counts two: an upper bound)."""
    return data.count(b"\n", start) + data.count(b"\r", start)


async def _events(body: httpx.Response, url: httpx.URL) -> AsyncIterator[bytes]:
    """*body*'s decoded bytes, refused once one event (or line) runs past the limit, each
    of its lines counted with what holding it costs: the SSE reader would otherwise buffer
    it whole, however long, or hold 7 times its size in short lines."""
    pending = 0  # bytes since the last blank line, and what its lines cost
    tail = b""  # the end of the previous chunk, for a blank line split between chunks
    async for chunk in decoded(body):
        seen = tail + chunk
        ends = [seen.rfind(blank) + len(blank) for blank in _BLANK_LINES if blank in seen]
        if ends:
            start = max(ends)
            pending = len(seen) - start + _LINE_COST * _lines(seen, start)
        else:
            pending += len(chunk) + _LINE_COST * _lines(chunk)
        if pending > MAX_ANSWER_BYTES:
            raise too_large(f"an event of the stream from {url}")
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
            if sse.id and not sendable(sse.id):
                # It would go back as Last-Event-ID on a resume: no header can carry it.
                raise InvalidAgentResponseError(
                    "agent sent an SSE event id that is no HTTP header value (not printable "
                    f"ASCII, or spaces at an end: {_start(sse.id, 40)}), so the stream could "
                    "not be resumed from it"
                )
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
