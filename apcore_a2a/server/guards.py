"""Pure-ASGI request guard on every route (it acts on A2A routes), reading the request
record the matched route made (:mod:`apcore_a2a.classify`). It adds what the SDK lacks,
each refusal an A2A error in the shape of the request's binding
(:func:`~apcore_a2a.edge.refusal.refusal`):

* ``ContentTypeNotSupportedError`` for a POST with a body that is not JSON, also without
  Content-Type (what a cross-origin page sends unasked; body-less POSTs such as
  ``:cancel`` need none): REST 400, JSON-RPC ``-32005`` (spec §5.4); ``413`` for a body
  over the limit (on ``Content-Length`` and again while reading);
* ``-32700`` (JSON-RPC) or ``400`` (REST) for a body that is not UTF-8, nested deeper than
  Python's decoder goes, with an unpaired surrogate escape, a number that is no finite
  double (``NaN``, ``Infinity``, ``1e999``, an integer of 400 digits: ``_json.py``), or
  (JSON-RPC) a key named twice in one object (REST's parser refuses it, Python's kept the
  last) or no ``id`` (the SDK: -32603, HTTP 500, or no answer); ``-32602`` for JSON-RPC
  0.3 file bytes that are not base64 (``upstream/file_bytes.py``);
* ``-32602`` (JSON-RPC) or ``400`` (REST) for a body beyond a shape limit
  (:mod:`apcore_a2a.shape`), before anything parses it;
* ``-32602`` / ``400`` for values the SDK misreads: a 0.3 ``historyLength`` no int32
  holds, a body's integer spelt as Python spells one (``"2_0"``), an enum name A2A
  does not define, a REST query boolean other than ``true``/``false`` or single-valued
  parameter given twice, JSON-RPC 1.0 ``params`` of ``null`` or an array
  (``upstream/wire_values.py``); a query integer JSON writes otherwise (``2.0``) is handed
  on in digits, and so is a JSON-RPC 0.3 integer string (``"2e0"``);
* the version rule (:func:`~apcore_a2a.classify.version_error`): without ``A2A-Version``
  a request is 0.3 (spec §3.6.2), so a 1.0 method name or REST path is refused
  (``VersionNotSupportedError``) with a message saying what to send;
* stream limits (:class:`~apcore_a2a.server.limits.StreamLimiter`): over the agent's cap
  ``503`` + ``Retry-After``, over the caller's quota ``429`` (``QuotaExceededError``); a
  stream's slot comes back the moment its client hangs up, and a stream whose client hangs
  up before its answer starts is ended then (a resumed subscription may wait long for its
  first event, a message-reply skill's stream for its module, and the SDK's routes answer
  only once it came).

The answer side (scrubbing, SSE event ids, cancel-on-drop) is :mod:`apcore_a2a.streams`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
)
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apcore_a2a._json import NumberError, parse_refusal, utf8_json
from apcore_a2a.classify import MESSAGE_METHODS, RequestInfo, request_info, version_error
from apcore_a2a.edge.refusal import refusal
from apcore_a2a.server.caller_keys import CallerKeys
from apcore_a2a.server.limits import StreamLimiter
from apcore_a2a.streams.tap import Answer
from apcore_a2a.upstream.file_bytes import undecodable_rpc03
from apcore_a2a.upstream.wire_values import sdk_payload, sdk_query, values_error

_JSON_TYPES = ("application/json", "application/a2a+json")


def _is_json_type(value: str | None) -> bool:
    media = (value or "").split(";", 1)[0].strip().lower()
    return media in _JSON_TYPES or media.endswith("+json")


@dataclass
class RequestGuard:
    """See the module docstring."""

    app: ASGIApp
    max_body_bytes: int
    streams: StreamLimiter
    #: how stream quotas key a caller (``server/caller_keys.py``)
    caller_keys: CallerKeys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        info = request_info(scope) if scope["type"] == "http" else None
        if info is None or not info.is_a2a:
            await self.app(scope, receive, send)
            return
        rejection = await self._check_body(scope, info, receive)
        if info.cut:
            return  # nobody to answer (or the body deadline's 408 went out), nothing to run
        if rejection is None:
            # The method's own version; a JSON-RPC method not known has none (its error follows).
            spoken = info.version if info.method else None
            wrong: A2AError | None = version_error(info.announced, spoken)
            wrong = wrong or values_error(info)
            rejection = None if wrong is None else (wrong, None)
            read = info.query
            if wrong is None:  # handed on as the SDK is to read it
                read = sdk_query(info)
                sdk_payload(info)
            if read != info.query:  # a copy: the server's access log keeps what was sent
                scope = dict(scope, query_string=read)
        if rejection is not None:
            await refusal(info, *rejection)(scope, receive, send)
            return
        app = self.app
        if not info.routable:  # an A2A route that is not served here (a reserved segment)
            app = refusal(info, MethodNotFoundError(message="Not Found"), 404)
        if info.streaming:
            await self._stream(scope, info, app, receive, send)
        else:
            await app(scope, info.replay(receive), send)

    async def _check_body(
        self, scope: Scope, info: RequestInfo, receive: Receive
    ) -> tuple[A2AError, int | None] | None:
        """``(error, HTTP status or None for the binding's own)`` to refuse, else ``None``."""
        if info.http_method != "POST":
            return None
        headers = Headers(scope=scope)
        length = headers.get("content-length")
        has_body = length != "0" and (length is not None or "transfer-encoding" in headers)
        if has_body and not _is_json_type(headers.get("content-type")):
            # Also without any Content-Type: what a cross-origin page can send unasked.
            return ContentTypeNotSupportedError(
                message="Unsupported Content-Type: send JSON (application/a2a+json or "
                "application/json)"
            ), None
        limit = self.max_body_bytes
        too_large = length is not None and length.isdigit() and int(length) > limit
        if too_large or not await info.load_body(receive, limit):
            return InvalidRequestError(message="Payload too large"), 413
        body = info.body or b""
        if not utf8_json(body):
            return JSONParseError(message="Parse error: body is not UTF-8 JSON (RFC 8259)"), None
        if info.shape_error is not None:
            return info.shape_error.refusal(), None
        payload = info.payload
        if info.binding == "rest":
            if isinstance(info.parse_error, UnicodeDecodeError | NumberError):
                # The SDK's REST dispatcher decodes outside its error handling (HTTP 500), and
                # its parser takes NaN and 1e999 (a task holding one can then be read over no
                # JSON binding) or refuses a long integer in Python's words.
                return parse_refusal(info.parse_error), None
            lone = _lone_surrogate(body, info)
            return None if lone is None else (lone, None)
        if info.parse_error is not None:
            # The SDK maps only JSONDecodeError to -32700; these reach it as -32603 or 500.
            return parse_refusal(info.parse_error), None
        lone = _lone_surrogate(body, info)
        if lone is not None:
            return lone, None
        if info.version == "0.3" and info.method in MESSAGE_METHODS:
            undecodable = undecodable_rpc03(payload)
            if undecodable is not None:
                return InvalidParamsError(message=undecodable), None
        if isinstance(payload, dict) and "method" in payload and "id" not in payload:
            message = "Invalid Request: 'id' is required (A2A has no notifications)"
            return InvalidRequestError(message=message), None
        return None

    async def _stream(
        self, scope: Scope, info: RequestInfo, app: ASGIApp, receive: Receive, send: Send
    ) -> None:
        caller = self.caller_keys.of_scope(scope)
        refused = await self.streams.acquire(caller)
        if refused is not None:
            retry = {"retry-after": str(refused.retry_after)}
            await refusal(info, refused.error, refused.status, retry)(scope, receive, send)
            return
        released = False

        async def release() -> None:
            nonlocal released
            if not released:
                released = True
                await self.streams.release(caller)

        async def ending(message: Message) -> None:
            # The slot is free once the last chunk leaves: the caller may open its next
            # stream at once, before the app below has finished tearing this one down.
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                await release()
            await send(message)

        try:
            # A stream's body is read now (GET has none), unless 404 answers it anyway.
            if info.routable and not await info.load_body(receive, self.max_body_bytes):
                too_large = InvalidRequestError(message="Payload too large")
                await refusal(info, too_large, 413)(scope, receive, send)
                return
            await _until_gone(scope, info, app, receive, ending, release)
        finally:
            await release()


async def until_hung_up(receive: Receive) -> None:
    """Return once the client hangs up. Called once the request's body was read, so only
    the hang-up is left to receive (or the body, if the route never read it)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _until_gone(
    scope: Scope,
    info: RequestInfo,
    app: ASGIApp,
    receive: Receive,
    send: Send,
    release: Callable[[], Awaitable[None]],
) -> None:
    """Serve a stream, giving its slot back (*release*) the moment its client hangs up,
    and ending it then if its answer has not started.

    The client is watched from the start, not only once the answer starts: the SDK's
    routes answer a stream once its first event came (request errors go out as plain
    error answers), and only then does the answer listen for its client. Meanwhile a
    resumed subscription of a quiet task, a message-reply skill's module, a push URL
    check or a busy task store would hold the slot, and even a watcher started a moment
    late lets the caller's next stream, sent right after the hang-up, find it still held.
    The hang-up is noted on the call's answer, for cancel-on-drop (``streams/answers.py``).
    The request body was read (*info*), so the client's ``receive`` only has its hang-up
    left (uvicorn answers every ``receive`` after it ``http.disconnect``, so the answer's
    own listener hears it too)."""
    serving = asyncio.current_task()
    started = gone = False

    async def starting(message: Message) -> None:
        nonlocal started
        started = started or message["type"] == "http.response.start"
        await send(message)

    async def hang_up() -> None:
        nonlocal gone
        await until_hung_up(receive)
        await release()  # before anything is torn down: the caller may stream again now
        if not started and serving is not None:
            gone = True
            Answer.of(scope).hung_up = True
            serving.cancel()  # nothing was answered: nothing to finish

    watch = asyncio.ensure_future(hang_up())
    try:
        await app(scope, info.replay(receive), starting)
    except asyncio.CancelledError:
        if not gone or serving is None or serving.uncancel() > 0:
            raise  # a cancel of our caller's, not the hang-up's
    else:
        if gone and serving is not None:
            serving.uncancel()  # the app swallowed the hang-up's cancel
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)


# Two patterns, each with a literal start the regex engine finds at memchr speed (one
# pattern with both alternatives scans a 10 MB body byte by byte, for a quarter second).
_SURROGATE_HINTS = (re.compile(rb"\\u[dD][89a-fA-F]"), re.compile(rb"\xed[\xa0-\xbf]"))


def _lone_surrogate(body: bytes, info: RequestInfo) -> JSONParseError | None:
    """The refusal of a body holding an unpaired surrogate escape (valid JSON, no UTF-8
    text): JSON-RPC's SDK echoes it in an error it then cannot encode; REST's protobuf
    parser names its own internals (a ``SystemError``, a codec's message)."""
    if not any(p.search(body) for p in _SURROGATE_HINTS):
        return None
    try:
        json.dumps(info.payload, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return JSONParseError(message="Parse error: a string holds an unpaired UTF-16 surrogate")
    return None
