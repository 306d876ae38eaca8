"""OpenTelemetry (off unless ``settings.telemetry``; spans go to the global tracer
provider): one SERVER span per A2A call (:func:`telemetry_middleware`, named by
:class:`A2ASpans`; gRPC: :func:`rpc_span`), a child span per module run (:class:`ModuleSpans`).
Names and attributes follow the draft A2A conventions (:data:`CONVENTIONS`), or those of
apcore-a2a 0.1 with ``telemetry_legacy_names``; docs/operations.md lists them. The a2a-sdk's
own spans are the SDK's business: its switch is ``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED``,
which the operator sets (nothing here touches it, nor anything else of the process).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from starlette.middleware import Middleware
from starlette.types import Scope

from apcore_a2a._text import escape_controls, escape_invisible
from apcore_a2a._version import __version__
from apcore_a2a.classify import MESSAGE_METHODS, RequestInfo, request_info
from apcore_a2a.errors import MissingExtraError
from apcore_a2a.execution.observer import Execution, task_state
from apcore_a2a.streams.tap import Answer

TRACER_NAME = "apcore_a2a"
#: the draft these spans follow (docs/operations.md names it too)
CONVENTIONS = "OpenTelemetry semantic-conventions-genai model/a2a, development draft of 2026"
TELEMETRY_EXTRA_HINT = (
    "telemetry=True needs OpenTelemetry: pip install 'apcore-a2a[telemetry]' "
    "(opentelemetry-api and opentelemetry-instrumentation-asgi)"
)
#: Longest string attribute (characters) and longest list attribute (items) our spans take
#: from a request: ids are the client's choice (up to ``max_string_bytes``), and every
#: span is exported, stored and indexed by the tracing backend. A2A ids are UUIDs.
MAX_VALUE = 256
MAX_LIST = 32
#: gRPC statuses that are the server's fault, which alone mark a SERVER span as an error
#: (OpenTelemetry's RPC conventions; HTTP's ASGI instrumentation marks only a 5xx)
SERVER_FAULTS = frozenset(
    {"UNKNOWN", "DEADLINE_EXCEEDED", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS"}
)
#: URL patterns (searched in the full request URL) that get no request span.
UNTRACED_URLS = (r"^[a-z]+://[^/]+/health(\?.*)?$", r"^[a-z]+://[^/]+/metrics(\?.*)?$")
#: the module-span attributes of apcore-a2a 0.1, for ``telemetry_legacy_names``
LEGACY_ATTRIBUTES = {
    "a2a.task.id": "a2a.task_id",
    "gen_ai.conversation.id": "a2a.context_id",
    "apcore.module.id": "a2a.skill_id",
    "a2a.method.name": "a2a.method",
    "a2a.task.state": "a2a.task_state",
    "error.type": "apcore.error_code",
}

Attributes = MutableMapping[str, Any]

try:
    from opentelemetry import context, trace
except ImportError as exc:
    raise MissingExtraError(TELEMETRY_EXTRA_HINT) from exc


def telemetry_middleware(*, legacy_names: bool = False) -> list[Middleware]:
    """The request-span middleware; raises ``MissingExtraError`` naming the extra if missing."""
    try:
        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
        from opentelemetry.util.http import (
            OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST as CAPTURED,
        )
        from opentelemetry.util.http import ExcludeList
    except ImportError as exc:
        raise MissingExtraError(TELEMETRY_EXTRA_HINT) from exc
    from apcore_a2a.ops.http_meters import HostFreeMeters

    span = Middleware(
        OpenTelemetryMiddleware,
        excluded_urls=ExcludeList(list(UNTRACED_URLS)),
        exclude_spans=["receive", "send"],
        # request headers the operator has it copy (as the middleware reads them) are the
        # caller's too: then every span is looked at
        server_request_hook=_bounded_span if os.environ.get(CAPTURED) else _bounded_request,
        # its HTTP metrics, without a series per Host header a client sends
        meter_provider=HostFreeMeters(),
    )
    return [span] if legacy_names else [span, Middleware(A2ASpans)]


def _get(doc: dict[str, Any], name: str) -> Any:
    """Member *name* (camelCase) or its proto field name (snake_case, as some peers send)."""
    found = doc.get(name)
    return found if found is not None else doc.get(re.sub(r"([A-Z])", r"_\1", name).lower())


def bounded(value: str) -> str:
    """A caller's *value* as a span keeps it: its control characters (``\\x1b``), line
    separators and bidi controls written out, at most :data:`MAX_VALUE` characters."""
    return escape_invisible(escape_controls(value[:MAX_VALUE]))[:MAX_VALUE]


def _put(attributes: Attributes, key: str, value: Any) -> None:
    if isinstance(value, str) and value:
        attributes[key] = bounded(value)


def _bounded_request(span: Any, scope: Scope) -> None:
    """The HTTP instrumentation's hook: the span name and the attributes it took from the
    request (path, URL, ``User-Agent``, ``Host``: the caller's, up to a request head's
    16 KiB) made :func:`bounded`, as ours are. Most requests need nothing: their parts
    are read first."""
    heads = dict(scope.get("headers") or ())
    host, agent = heads.get(b"host", b"").decode("latin-1"), heads.get(b"user-agent", b"")
    path, query = str(scope.get("path", "")), bytes(scope.get("query_string", b""))
    url = len(host) + len(path) + len(query) + 16  # scheme://host/path?query, at most
    said = host + path + query.decode("latin-1") + agent.decode("latin-1")
    if url <= MAX_VALUE and len(agent) <= MAX_VALUE and b"%" not in query and said.isprintable():
        return
    _bounded_span(span, scope)


def _bounded_span(span: Any, _scope: Scope) -> None:
    """*span*'s name and string attributes (a captured header's list of them too) that are
    long or not printable made :func:`bounded`."""

    def unbounded(value: object) -> bool:
        # isprintable: False for every character bounded() writes out (and a few more)
        return isinstance(value, str) and (len(value) > MAX_VALUE or not value.isprintable())

    name = getattr(span, "name", None)  # "GET /path" (a span under the legacy names keeps it)
    if isinstance(name, str) and unbounded(name):
        span.update_name(bounded(name))
    for key, value in (getattr(span, "attributes", None) or {}).items():
        if unbounded(value):
            span.set_attribute(key, bounded(value))
        elif isinstance(value, tuple) and any(map(unbounded, value)):
            span.set_attribute(key, [bounded(v) for v in value[:MAX_LIST]])


def read_params(params: Any, attributes: Attributes) -> None:
    """The message, task and tenant a request's parameters name (1.0 or 0.3 JSON)."""
    if not isinstance(params, dict):
        return
    message = params.get("message") or params.get("request")
    if isinstance(message, dict):
        _put(attributes, "a2a.message.id", _get(message, "messageId"))
        references = _get(message, "referenceTaskIds")
        if isinstance(references, list) and references:
            attributes["a2a.message.reference_task_ids"] = [
                bounded(str(r)) for r in references[:MAX_LIST]
            ]
        _put(attributes, "a2a.task.id", _get(message, "taskId"))
    task_id = _get(params, "taskId") or (params.get("id") if message is None else None)
    name = params.get("name") or params.get("parent")  # 0.3 gRPC: "tasks/{id}[/...]"
    if not task_id and isinstance(name, str) and name.startswith("tasks/"):
        task_id = name.split("/")[1]
    _put(attributes, "a2a.task.id", task_id)
    _put(attributes, "a2a.tenant", params.get("tenant"))


def _answer_attributes(answer: Answer) -> Attributes:
    """The task, conversation and last state a call's answer carried."""
    attributes: Attributes = {}
    _put(attributes, "a2a.task.id", answer.task_id)
    _put(attributes, "gen_ai.conversation.id", answer.context_id)
    _put(attributes, "a2a.task.state", answer.state)
    return attributes


def _request_attributes(info: RequestInfo, scope: Scope, attributes: Attributes) -> None:
    """What the request record, the matched route's path parameters and the request body
    (read once already) say."""
    attributes["a2a.method.name"] = info.method
    _put(attributes, "a2a.protocol.version", info.version)
    _put(attributes, "a2a.tenant", info.tenant)
    if info.binding == "jsonrpc":
        payload = info.payload
        read_params(payload.get("params") if isinstance(payload, dict) else None, attributes)
        return
    _put(attributes, "a2a.task.id", scope.get("path_params", {}).get("id"))  # REST: /tasks/{id}
    if info.method in MESSAGE_METHODS:
        read_params(info.payload, attributes)  # the body the edge parsed once


class A2ASpans:
    """ASGI middleware inside the request span: its A2A name, the request's attributes
    (from its record) and the task's, as the call's answer names it (``streams/tap.py``:
    for a stream, the last state it sent), set just before the last chunk leaves."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        info = request_info(scope) if scope["type"] == "http" else None
        span = trace.get_current_span()
        if info is None or not info.is_a2a or not span.is_recording():
            await self.app(scope, receive, send)
            return
        answer = Answer.of(scope)
        status = 200

        def finish() -> None:
            # Before the last body goes out: the request span ends right after it.
            if info.method and span.is_recording():
                attributes: dict[str, Any] = {}
                _request_attributes(info, scope, attributes)
                attributes.update(_answer_attributes(answer))
                _put(attributes, "error.type", str(status) if status >= 400 else answer.error_type)
                span.update_name(info.method)
                span.set_attributes(attributes)

        async def watched(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                finish()
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            finish()  # no-op once the span has ended


@contextlib.contextmanager
def rpc_span(
    spans: ModuleSpans, path: str, method: str, request: Any, context: Any, answer: Answer
) -> Iterator[None]:
    """The SERVER span of one gRPC call to *path* (A2A *method*), from the tracer and names
    of the agent's *spans*, which ends with the task *answer* (the call's,
    ``streams/tap.py``) noted. 0.3 is the ``a2a.v1`` service, 1.0 ``lf.a2a.v1``."""
    from google.protobuf import json_format

    legacy = spans.legacy
    attributes: dict[str, Any] = {"rpc.system": "grpc", "rpc.method": path}
    if legacy:
        attributes["a2a.method"] = method
    else:
        attributes["a2a.method.name"] = method
        attributes["a2a.protocol.version"] = "0.3" if path.startswith("/a2a.") else "1.0"
        # None: not decoded; json_format.Error: a value JSON cannot hold (both refused)
        with contextlib.suppress(json_format.Error):
            if request is not None:
                read_params(json_format.MessageToDict(request), attributes)
    name = f"a2a {method}" if legacy else method
    # Shaped as an HTTP call's span: no exception event (its message may quote the caller,
    # its frames name our files), an error status only for the server's own fault.
    with spans.tracer.start_as_current_span(
        name,
        kind=trace.SpanKind.SERVER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except Exception as exc:
            code = context.code() if context is not None else None
            kind = getattr(code, "name", None) or type(exc).__name__
            if not legacy:
                span.set_attribute("error.type", kind)
            if code is None or kind in SERVER_FAULTS:
                span.set_status(trace.Status(trace.StatusCode.ERROR, kind))
            raise
        finally:
            if not legacy and span.is_recording():
                span.set_attributes(_answer_attributes(answer))


class ModuleSpans:
    """Execution observer: each module run in a span, current while the module runs (so
    the module's own spans are its children; its trace id is what the run's logs carry)."""

    def __init__(self, *, legacy_names: bool = False) -> None:
        #: the agent's tracer, and whether it names spans as apcore-a2a 0.1 did (gRPC
        #: request spans take both: :func:`rpc_span`)
        self.tracer = trace.get_tracer(TRACER_NAME, __version__)
        self.legacy = legacy_names
        self._open: dict[Execution, tuple[Any, Any]] = {}

    def _named(self, attributes: dict[str, Any]) -> dict[str, Any]:
        if not self.legacy:
            return attributes
        return {LEGACY_ATTRIBUTES.get(key, key): value for key, value in attributes.items()}

    def started(self, execution: Execution) -> None:
        attributes: dict[str, Any] = {
            "a2a.task.id": execution.task_id[:MAX_VALUE],
            "gen_ai.conversation.id": execution.context_id[:MAX_VALUE],  # the client's
            "apcore.module.id": execution.skill_id,
        }
        if execution.method:
            attributes["a2a.method.name"] = execution.method
        span = self.tracer.start_span(
            f"execute {execution.skill_id}",
            kind=trace.SpanKind.INTERNAL,
            attributes=self._named(attributes),
        )
        token = context.attach(trace.set_span_in_context(span))
        self._open[execution] = (span, token)
        span_context = span.get_span_context()
        if span_context.is_valid:
            execution.trace_id = format(span_context.trace_id, "032x")

    def finished(self, execution: Execution) -> None:
        opened = self._open.pop(execution, None)
        if opened is None:
            return
        span, token = opened
        state = execution.state if self.legacy else task_state(execution.state)
        ended: dict[str, Any] = {"a2a.task.state": state}
        if execution.error_code and (self.legacy or execution.state == "failed"):
            ended["error.type"] = execution.error_code
        span.set_attributes(self._named(ended))
        if execution.state == "failed":
            span.set_status(trace.Status(trace.StatusCode.ERROR, execution.error_code))
        span.end()
        context.detach(token)
