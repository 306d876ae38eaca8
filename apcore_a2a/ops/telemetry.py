"""OpenTelemetry: one SERVER span per A2A HTTP request, a child span per module run.

Off unless ``settings.telemetry``. Spans go to the globally configured tracer provider
(set up the OpenTelemetry SDK and an exporter in your application, or run under
``opentelemetry-instrument``); without one every call here is a no-op.

* :func:`telemetry_middleware` -- the maintained ``opentelemetry-instrumentation-asgi``
  middleware: a SERVER span per request that continues an inbound ``traceparent``.
  ``/health`` and ``/metrics`` are left out, and so are the per-message receive/send
  spans, which would add two spans per SSE event.
* :class:`ModuleSpans` -- an execution observer: ``execute <skill>`` spans, children
  of the request that sent the message, with ``a2a.task_id``, ``a2a.context_id``,
  ``a2a.skill_id``, ``a2a.method`` and the final ``a2a.task_state``.
* :func:`set_sdk_spans` -- the a2a-sdk traces its handlers, queues and dispatchers
  (dozens of spans per message) whenever OpenTelemetry is importable. The SDK decides
  that once, from an environment variable, at import; ``settings.sdk_telemetry``
  switches them per process instead. Parents stay intact either way: a disabled SDK
  span passes its parent's context through.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from apcore_a2a._version import __version__
from apcore_a2a.errors import MissingExtraError
from apcore_a2a.execution.observer import Execution

if TYPE_CHECKING:
    from starlette.middleware import Middleware

__all__ = [
    "TELEMETRY_EXTRA_HINT",
    "TRACER_NAME",
    "ModuleSpans",
    "set_sdk_spans",
    "telemetry_middleware",
]

logger = logging.getLogger("apcore_a2a.ops.telemetry")

TRACER_NAME = "apcore_a2a"
TELEMETRY_EXTRA_HINT = (
    "telemetry=True needs OpenTelemetry: pip install 'apcore-a2a[telemetry]' "
    "(opentelemetry-api and opentelemetry-instrumentation-asgi)"
)
#: URL patterns (searched in the full request URL) that get no request span.
UNTRACED_URLS = (r"^[a-z]+://[^/]+/health(\?.*)?$", r"^[a-z]+://[^/]+/metrics(\?.*)?$")


def telemetry_middleware(untraced: tuple[str, ...] = UNTRACED_URLS) -> Middleware:
    """The request-span middleware; raises ``MissingExtraError`` naming the extra if missing."""
    try:
        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
        from opentelemetry.util.http import ExcludeList
    except ImportError as exc:
        raise MissingExtraError(TELEMETRY_EXTRA_HINT) from exc
    from starlette.middleware import Middleware

    for pattern in untraced:
        re.compile(pattern)  # fail at startup, not on the first request
    return Middleware(
        OpenTelemetryMiddleware,
        excluded_urls=ExcludeList(list(untraced)),
        exclude_spans=["receive", "send"],
    )


class ModuleSpans:
    """Execution observer that wraps each module run in a span (see module docstring).

    The span is the current span while the module runs, so spans the module (or
    apcore) starts itself become its children; its trace id is also what log records
    of the run carry.
    """

    def __init__(self, tracer_provider: Any = None) -> None:
        try:
            from opentelemetry import context, trace
        except ImportError as exc:
            raise MissingExtraError(TELEMETRY_EXTRA_HINT) from exc
        self._trace = trace
        self._context = context
        self._tracer = trace.get_tracer(TRACER_NAME, __version__, tracer_provider)
        self._open: dict[Execution, tuple[Any, Any]] = {}

    def started(self, execution: Execution) -> None:
        attributes: dict[str, str] = {
            "a2a.task_id": execution.task_id,
            "a2a.context_id": execution.context_id,
            "a2a.skill_id": execution.skill_id,
        }
        if execution.method:
            attributes["a2a.method"] = execution.method
        span = self._tracer.start_span(
            f"execute {execution.skill_id}",
            kind=self._trace.SpanKind.INTERNAL,
            attributes=attributes,
        )
        token = self._context.attach(self._trace.set_span_in_context(span))
        self._open[execution] = (span, token)
        span_context = span.get_span_context()
        if span_context.is_valid:
            execution.trace_id = format(span_context.trace_id, "032x")

    def finished(self, execution: Execution) -> None:
        opened = self._open.pop(execution, None)
        if opened is None:
            return
        span, token = opened
        span.set_attribute("a2a.task_state", execution.state)
        if execution.error_code:
            span.set_attribute("apcore.error_code", execution.error_code)
        if execution.state == "failed":
            status = self._trace.Status(self._trace.StatusCode.ERROR, execution.error_code)
            span.set_status(status)
        span.end()
        self._context.detach(token)


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


class _Silent:
    """Tracer, span and context manager in one, recording nothing.

    The SDK wraps ~55 calls of every request in spans. OpenTelemetry's ``NoOpTracer`` still
    attaches and detaches a context for each (about 4 µs); this shared object does nothing
    at all, which saves about 0.2 ms of CPU per SendMessage while SDK spans are off.
    """

    __slots__ = ()

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> _Silent:
        return self

    def start_span(self, *args: Any, **kwargs: Any) -> _Silent:
        return self

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *args: object) -> None:
        return None

    def is_recording(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return _ignore


_SILENT = _Silent()


class _SdkTracerGate:
    """Stands in for ``opentelemetry.trace`` inside ``a2a.utils.telemetry``.

    The SDK's tracing wrappers look the tracer up on every call through that module
    attribute, so answering with a no-op tracer switches their spans off (and back on)
    without re-importing anything.
    """

    def __init__(self, real: Any) -> None:
        self.real = real
        self.enabled = True

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        if self.enabled:
            return self.real.get_tracer(*args, **kwargs)
        return _SILENT

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def set_sdk_spans(enabled: bool) -> None:
    """Turn the a2a-sdk's own spans on or off for this process.

    Has no effect when OpenTelemetry is not installed, or when the SDK was switched off
    by its environment variable before it was imported (it is then off for good).
    """
    from a2a.utils import telemetry as sdk

    if not (getattr(sdk, "otel_installed", False) and getattr(sdk, "otel_enabled", False)):
        return
    current = getattr(sdk, "trace", None)
    gate = current if isinstance(current, _SdkTracerGate) else _SdkTracerGate(current)
    gate.enabled = enabled
    setattr(sdk, "trace", gate)  # noqa: B010 - the SDK module does not export it
