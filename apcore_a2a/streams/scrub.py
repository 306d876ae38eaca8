"""Every error the agent sends, ours or the SDK's, is sanitized and bounded.

The SDK answers some failures with raw exception text (-32603 carries ``str(exc)``: a
database URL, a path; validation errors carry pages of pydantic text with links). Each
error gets our errors' codes (``upstream/error_answers.py``), then :func:`scrub_error`:
paths, traceback lines and links go, the message is cut to 500 characters and each string
of its data to 200; -32603 (HTTP 500) says only "Internal error" unless the executor
worded it or it is one of our errors (``TaskUnreadableError`` is a REST 500). What the
handler raised is rendered from the exception (:func:`error_answer`, with the edge's
builder, ``edge/refusal.py``); only an error the SDK's route answered before the handler
is read back (:func:`error_body`). The gRPC servicers answer from the
exception: :func:`scrub_exception` applies the same rule to it.

A path in an error's text is hidden unless the caller sent it (:func:`said_in_request`,
:func:`said_in_call`): ``Skill not found: /v1/typo`` quotes the caller's own value back.
A module's own message was sanitized where it was made (``adapters/errors.map_error``),
without the request: what a caller sends cannot bring a path of the agent's back into it.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, get_args

from a2a.compat.v0_3 import types as types_v03
from a2a.utils.errors import A2AError, InternalError, InvalidRequestError
from google.protobuf.message import Message
from starlette.types import Scope

from apcore_a2a._json import parse_refusal
from apcore_a2a._text import ECHO_LIMIT, echoed
from apcore_a2a.adapters.errors import sanitize
from apcore_a2a.classify import RequestInfo
from apcore_a2a.edge.refusal import error_document
from apcore_a2a.errors import OWN_ERRORS, RETRY_AFTER_KEY
from apcore_a2a.upstream.error_answers import correct_error
from apcore_a2a.upstream.error_metadata import string_metadata
from apcore_a2a.upstream.rest_parse_errors import invalid_params_rest
from apcore_a2a.upstream.v03_invalid_params import invalid_params_03

MAX_MESSAGE = 500
MAX_DATA_TEXT = 200
INTERNAL = "Internal error"
#: error-data key with which the executor marks its own (already sanitized) wording
OURS_KEY = "apcoreCode"
_LINK = re.compile(r"\s*(?:For further information visit\s+)?https?://\S+")
#: a word longer than any the SDK or we write: a caller's value the SDK's text quotes whole
#: ("Task … was specified", protobuf's "Couldn't parse … string", "which is …"), cut as
#: we cut our own quotes of one (``_text.echoed``)
_LONG_RUN = re.compile(rf"\S{{{2 * ECHO_LIMIT + 1},}}")
#: the codes A2A 0.3 knows; a 0.3 client gets -32603 for the others (as from the SDK)
_V03_CODES = frozenset(
    model.model_fields["code"].default
    for model in get_args(types_v03.A2AError.model_fields["root"].annotation)
)


def said_in_request(scope: Scope, info: RequestInfo) -> list[str]:
    """What the caller of the HTTP request *scope* said that may look like a path: its URL
    path, query values (as its record parsed them) and header values, and the strings of
    its body."""
    heard = [str(scope.get("path", "")), *(value for _, _, value in info.params)]
    heard += (value.decode("latin-1") for _, value in scope.get("headers", ()))
    return _pathlike([*heard, *_strings(info.payload)])


def said_in_call(metadata: Iterable[tuple[str, Any]] | None, request: Any) -> list[str]:
    """What the caller of a gRPC call said that may look like a path: its metadata's text
    values and the strings of its *request* message."""
    heard = [value for _, value in metadata or () if isinstance(value, str)]
    return _pathlike([*heard, *_strings(request)])


def _pathlike(texts: Iterable[str]) -> list[str]:
    return [text for text in texts if "/" in text or "\\" in text]


def _strings(value: Any) -> Iterator[str]:
    """The strings of a parsed JSON body or a protobuf message, keys too."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Message):
        for _field, item in value.ListFields():
            yield from _strings(item)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, Sequence) and not isinstance(value, bytes):
        for item in value:
            yield from _strings(item)


def _clean(text: str, limit: int, said: Collection[str]) -> str:
    if "validation error" in text and "[type=" in text:
        text = _summarize_validation(text)
    text = _LONG_RUN.sub(lambda run: echoed(run[0]), _LINK.sub("", text))
    return sanitize(text, limit, said)


def _summarize_validation(text: str) -> str:
    """A pydantic ValidationError dump (location lines, then indented ``problem [type=...,
    input_value=...]`` lines) as ``field: problem; ...``, without the echoed input."""
    problems: list[str] = []
    location = ""
    for line in text.splitlines()[1:]:
        if not line.startswith(" "):
            location = line.strip()
            continue
        problem = line.strip().split(" [type=", 1)[0]
        if problem.startswith("For further information"):
            continue
        problems.append(f"{location}: {problem}" if location else problem)
    shown = "; ".join(problems[:3])
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return f"Invalid request: {shown}{more}" if shown else "Invalid request"


def _clean_data(value: Any, said: Collection[str]) -> Any:
    if isinstance(value, str):
        return _clean(value, MAX_DATA_TEXT, said)
    if isinstance(value, list):
        return [_clean_data(v, said) for v in value]
    if isinstance(value, dict):
        return {k: _clean_data(v, said) for k, v in value.items()}
    return value


def _dicts(error: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each dict in an error's ``data`` / ``details`` (or a list there), then its ``metadata``."""
    for holder in (error.get("data"), *(error.get("details") or ())):
        for item in holder if isinstance(holder, list) else [holder]:
            if isinstance(item, dict):
                yield item
                if isinstance(item.get("metadata"), dict):
                    yield item["metadata"]


def _ours(error: dict[str, Any]) -> bool:
    """Whether an internal error is one the executor worded: it names the apcore code, in
    an ``ErrorInfo``'s metadata (1.0, REST) or in the error's data itself (JSON-RPC 0.3,
    whose data is the error's own, as a2a-sdk's 0.3 adapter sends it)."""
    return any(isinstance(d.get(OURS_KEY), str) for d in _dicts(error))


def _own(error: dict[str, Any]) -> bool:
    """Whether an error is one of ours (``apcore_a2a.errors``), by its ErrorInfo reason."""
    return any(d.get("reason") in OWN_ERRORS for d in _dicts(error))


def scrub_error(error: dict[str, Any], said: Collection[str] = ()) -> dict[str, Any]:
    """A sanitized copy of one error object (JSON-RPC or REST shape); *said*: the caller's
    own values (:func:`said_in_request`), which it may quote back."""
    code = error.get("code")
    if code in (-32603, 500) and not _ours(error) and not _own(error):
        out = {k: v for k, v in error.items() if k in ("code", "status")}
        out["message"] = INTERNAL
        return out
    out = dict(error)
    message = error.get("message")
    if isinstance(message, str):
        out["message"] = _clean(message, MAX_MESSAGE, said) or "Error"
    for key in ("data", "details"):
        if key in out:
            out[key] = _clean_data(out[key], said)
    return out


def scrub_exception(error: A2AError, said: Collection[str] = ()) -> A2AError:
    """*error* as :func:`scrub_error` would send it, for an answer built from the exception
    itself (the gRPC servicers'): a copy with its message and data strings cleaned and cut
    (*said*: :func:`said_in_call`); an internal error the executor did not word says only
    "Internal error"."""
    data = error.data if isinstance(error.data, dict) else None
    if isinstance(error, InternalError) and not isinstance((data or {}).get(OURS_KEY), str):
        return InternalError()
    clean = copy.copy(error)
    clean.message = _clean(str(error.message), MAX_MESSAGE, said) or "Error"
    clean.data = None if data is None else _clean_data(data, said)
    return clean


class Scrubbed:
    """One error answer, ready to send: the document, its HTTP status, ``Retry-After``."""

    __slots__ = ("code", "document", "retry_after", "status")

    def __init__(self, document: dict[str, Any], rest: bool, said: Collection[str]) -> None:
        error = scrub_error(correct_error(document["error"]), said)
        self.retry_after = _retry_after(error)
        # Last: a list the SDK put into ErrorInfo.metadata is scrubbed item by item, then
        # sent as one text (upstream/error_metadata.py).
        self.document = {**document, "error": string_metadata(error)}
        self.code = error.get("code")
        status = self.code if rest and isinstance(self.code, int) else 200
        self.status = status if 200 <= status < 600 else 500

    def body(self) -> bytes:
        return json.dumps(self.document, ensure_ascii=False, separators=(",", ":")).encode()


def error_answer(info: RequestInfo, failure: Exception, said: Collection[str]) -> Scrubbed:
    """What the handler raised, as the request's binding and version answer it (*said*:
    :func:`said_in_request`)."""
    document = error_document(info, failure if isinstance(failure, A2AError) else InternalError())
    rest = info.binding == "rest"
    if not rest and info.version == "0.3" and document["error"]["code"] not in _V03_CODES:
        document["error"]["code"] = -32603
    return Scrubbed(document, rest, said)


def error_body(body: bytes, info: RequestInfo, said: Collection[str]) -> Scrubbed | None:
    """An error the SDK's route answered itself, read back from its JSON *body* (a 0.3
    request refused for its params alone gets ``-32602``: ``upstream/v03_invalid_params.py``;
    a REST value protobuf cannot read, invalid params: ``upstream/rest_parse_errors.py``;
    a REST body that is no JSON, JSON-RPC's -32700 text)."""
    try:
        document = json.loads(body)
    except ValueError:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("error"), dict):
        return None
    rest = info.binding == "rest"
    if rest and info.body is not None and info.payload is None and info.parse_error:
        # The SDK's words were Python's ("Failed to load JSON: Expecting value: line 1
        # column 13 (char 12)."); its status and reason stay (400, INVALID_REQUEST).
        refused = InvalidRequestError(message=parse_refusal(info.parse_error).message)
        return Scrubbed(error_document(info, refused), True, said)
    document["error"] = invalid_params_03(info, invalid_params_rest(info, document["error"]))
    return Scrubbed(document, rest, said)


def _retry_after(error: dict[str, Any]) -> int | None:
    for holder in _dicts(error):
        found = holder.get(RETRY_AFTER_KEY)  # our errors' text (apcore_a2a/errors.py)
        if isinstance(found, str) and found.isdecimal():
            return max(1, int(found))
    return None
