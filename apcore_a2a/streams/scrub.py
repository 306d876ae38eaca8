"""Every error the agent sends, ours or the SDK's, is sanitized and bounded.

The SDK answers some failures with raw exception text (-32603 carries ``str(exc)``: a
database URL, a path; validation errors carry pages of pydantic text with links; SSE
errors go out as they are). :func:`scrubbing_send` rewrites only error payloads (a JSON-RPC
``error``, a REST ``{"error": ...}`` body, such an object in an SSE ``data:`` line) and
leaves everything else untouched and unbuffered: the message loses paths, traceback lines
and links and is cut to 500 characters, each string in its data to 200; -32603 (and HTTP
500) say only "Internal error" without data, unless the executor worded them (their data
names the apcore code). Before that each error is answered as spec §5.4 and our errors say
(:func:`~apcore_a2a.upstream.error_answers.correct_error`; a REST status line follows the
corrected ``code``), and REST 429/503 answers get ``Retry-After`` from ``retryAfter``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import Message, Send

from apcore_a2a.adapters.errors import sanitize
from apcore_a2a.errors import RETRY_AFTER_KEY
from apcore_a2a.upstream.error_answers import correct_error

MAX_MESSAGE = 500
MAX_DATA_TEXT = 200
INTERNAL = "Internal error"
#: error-data key with which the executor marks its own (already sanitized) wording
OURS_KEY = "apcoreCode"
_LINK = re.compile(r"\s*(?:For further information visit\s+)?https?://\S+")
_MARKER = b'"error"'


def _clean(text: str, limit: int) -> str:
    if "validation error" in text and "[type=" in text:
        text = _summarize_validation(text)
    return sanitize(_LINK.sub("", text), limit)


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


def _clean_data(value: Any) -> Any:
    if isinstance(value, str):
        return _clean(value, MAX_DATA_TEXT)
    if isinstance(value, list):
        return [_clean_data(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean_data(v) for k, v in value.items()}
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
    """Whether an internal error is one the executor worded (it names the apcore code)."""
    metadata = (d.get("metadata") for d in _dicts(error))
    return any(isinstance(m, dict) and isinstance(m.get(OURS_KEY), str) for m in metadata)


def scrub_error(error: dict[str, Any]) -> dict[str, Any]:
    """A sanitized copy of one error object (JSON-RPC or REST shape)."""
    code = error.get("code")
    if code in (-32603, 500) and not _ours(error):
        out = {k: v for k, v in error.items() if k in ("code", "status")}
        out["message"] = INTERNAL
        return out
    out = dict(error)
    message = error.get("message")
    if isinstance(message, str):
        out["message"] = _clean(message, MAX_MESSAGE) or "Error"
    for key in ("data", "details"):
        if key in out:
            out[key] = _clean_data(out[key])
    return out


def _scrub_document(doc: Any) -> tuple[Any, int | None, int | None]:
    """(*doc* with its error answered and scrubbed, the error's retry-after seconds if any,
    the HTTP status of a REST error)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("error"), dict):
        return doc, None, None
    error = scrub_error(correct_error(doc["error"]))
    status = error.get("code") if isinstance(error.get("status"), str) else None
    return {**doc, "error": error}, _retry_after(error), status if isinstance(status, int) else None


def _retry_after(error: dict[str, Any]) -> int | None:
    for holder in _dicts(error):
        found = holder.get(RETRY_AFTER_KEY)
        if isinstance(found, int | float) and not isinstance(found, bool):
            return max(1, round(found))
    return None


def _scrub_sse(chunk: bytes) -> bytes:
    lines = chunk.split(b"\n")
    for i, line in enumerate(lines):
        if line.startswith(b"data:") and _MARKER in line:
            try:
                doc = json.loads(line[5:])
            except ValueError:
                continue
            cleaned, _, _ = _scrub_document(doc)
            if cleaned is not doc:
                lines[i] = b"data: " + json.dumps(cleaned, ensure_ascii=False).encode()
    return b"\n".join(lines)


def scrubbing_send(send: Send) -> Send:
    """Wrap *send* so error payloads leave sanitized (see the module docstring)."""
    start: Message | None = None
    streaming = False

    async def wrapped(message: Message) -> None:
        nonlocal start, streaming
        if message["type"] == "http.response.start":
            content_type = dict(message.get("headers") or ()).get(b"content-type", b"")
            streaming = content_type.startswith(b"text/event-stream")
            if streaming:
                await send(message)
            else:
                start = message
            return
        if message["type"] != "http.response.body":
            await send(message)
            return
        body: bytes = message.get("body", b"")
        if streaming:
            if _MARKER in body:
                message = {**message, "body": _scrub_sse(body)}
            await send(message)
            return
        if start is not None and (message.get("more_body", False) or _MARKER not in body):
            await send(start)
            start = None
        if start is None:
            await send(message)
            return
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        cleaned, retry_after, status = _scrub_document(doc)
        if status is not None and 400 <= status < 600:
            start = {**start, "status": status}
        headers = MutableHeaders(raw=list(start.get("headers") or ()))
        if cleaned is not doc:
            body = json.dumps(cleaned, ensure_ascii=False).encode()
            headers["content-length"] = str(len(body))
        if retry_after is not None and start.get("status") in (429, 503):
            headers["retry-after"] = str(retry_after)
        await send({**start, "headers": headers.raw})
        start = None
        await send({**message, "body": body})

    return wrapped
