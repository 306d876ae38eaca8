"""CLIENT spans for the calls of :class:`~apcore_a2a.client.A2AClient` (all span naming
of the client lives here).

When OpenTelemetry's API is installed, each call runs in a CLIENT span named after the
A2A 1.0 method, with the attributes of the draft OpenTelemetry conventions for A2A
(``a2a.method.name``, ``a2a.protocol.version``, ``a2a.message.id``, ``a2a.task.id``,
``a2a.task.state``, ``gen_ai.conversation.id``, ``server.address``, ``server.port``,
``error.type``), and the W3C ``traceparent`` of that span goes out with the request.
Without a configured tracer provider the spans record nothing; without the API there
are none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["a2a_call"]

_WRAPPERS = frozenset({"task", "message", "statusUpdate", "artifactUpdate"})


def _ignore(_result: Mapping[str, Any]) -> None:
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _request_attributes(
    method: str, version: str, url: str, params: Mapping[str, Any]
) -> dict[str, Any]:
    parts = urlsplit(url if "://" in url else "//" + url)  # gRPC: host:port
    attributes: dict[str, Any] = {"a2a.method.name": method, "a2a.protocol.version": version}
    if parts.hostname:
        attributes["server.address"] = parts.hostname
        attributes["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
    message = params.get("message")
    if isinstance(message, Mapping):
        if _text(message.get("messageId")):
            attributes["a2a.message.id"] = message["messageId"]
        task_id = _text(message.get("taskId"))
    else:
        task_id = _text(params.get("taskId")) or _text(params.get("id"))
    if task_id:
        attributes["a2a.task.id"] = task_id
    return attributes


def _answer_attributes(result: Mapping[str, Any]) -> dict[str, Any]:
    """Task, conversation and state of a result or stream event (as 1.0 JSON)."""
    if len(result) == 1 and next(iter(result)) in _WRAPPERS:
        result = next(iter(result.values()))
    found: dict[str, Any] = {}
    task_id = _text(result.get("taskId")) or (
        _text(result.get("id")) if "status" in result else None
    )
    if task_id:
        found["a2a.task.id"] = task_id
    if _text(result.get("contextId")):
        found["gen_ai.conversation.id"] = result["contextId"]
    state = (result.get("status") or {}).get("state")
    if _text(state):
        found["a2a.task.state"] = state
    return found


@contextlib.contextmanager
def a2a_call(
    method: str,
    version: str,
    url: str,
    params: Mapping[str, Any],
    headers: MutableMapping[str, str],
) -> Iterator[Callable[[Mapping[str, Any]], None]]:
    """The CLIENT span of one call (*method*: its A2A 1.0 name); adds ``traceparent`` to
    *headers*; yields what to call with each result (or stream event) as 1.0 JSON."""
    try:
        from opentelemetry import propagate, trace
    except ImportError:
        yield _ignore
        return
    attributes = _request_attributes(method, version, url, params)
    tracer = trace.get_tracer("apcore_a2a.client")
    # Not made current: a stream's span stays open while the caller runs between events.
    span = tracer.start_span(
        attributes["a2a.method.name"], kind=trace.SpanKind.CLIENT, attributes=attributes
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
