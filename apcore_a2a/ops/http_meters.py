"""The meters the OpenTelemetry ASGI middleware records its HTTP metrics with, without the
attributes a client chooses.

With the default (pre-1.0) HTTP conventions the middleware labels every
``http.server.duration``, ``http.server.active_requests`` and request/response size point
with ``http.server_name``: the request's ``Host`` header, verbatim. A client sending
distinct ``Host`` values (an agent bound to every interface answers any) makes one series
per value in the operator's metrics backend. Its ``http.target`` is the mount's
``root_path`` plus the route's template, and the SDK's ``/{tenant}`` mount puts the tenant
a caller names into that root path (``/acme/tasks/{id}``): one series per tenant sent.
:class:`HostFreeMeters` hands the middleware meters of the global meter provider whose
instruments leave the Host header out and name the route as the request record does
(``/{tenant}/tasks/{id}``: ``classify.RequestInfo.route``); the rest (method, status,
scheme, the socket's address) is bounded already.

Only the middleware gets these meters: nothing process-wide is replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import metrics

from apcore_a2a.classify import current_request

#: Attributes of the middleware's metric points that repeat request headers verbatim.
CLIENT_CHOSEN = frozenset({"http.server_name"})
#: The attribute naming the route (pre-1.0 HTTP conventions; 1.0's ``http.route`` is
#: never set by the middleware, and ``url.path`` is on spans only).
ROUTE = "http.target"


def _bounded(attributes: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if not attributes or (CLIENT_CHOSEN.isdisjoint(attributes) and ROUTE not in attributes):
        return attributes
    kept = {key: value for key, value in attributes.items() if key not in CLIENT_CHOSEN}
    if ROUTE in kept:
        info = current_request()  # the request the middleware records (its route's)
        if info is not None and info.route:
            kept[ROUTE] = info.route
        else:
            del kept[ROUTE]
    return kept


class _Instrument:
    """A synchronous instrument of the middleware's (an up-down counter, a histogram)
    recording through *inner* without the :data:`CLIENT_CHOSEN` attributes."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def add(self, amount: float, attributes: Any = None, context: Any = None) -> None:
        self._inner.add(amount, _bounded(attributes), context)

    def record(self, amount: float, attributes: Any = None, context: Any = None) -> None:
        self._inner.record(amount, _bounded(attributes), context)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Meter:
    """A meter whose up-down counters and histograms, the instruments the middleware
    creates, are :class:`_Instrument`; anything else is *inner*'s. A new kind the
    middleware starts to record with would leak the Host header again:
    ``tests/ops/test_telemetry_metrics.py`` reads every point it records and says so."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_up_down_counter(self, *args: Any, **kwargs: Any) -> _Instrument:
        return _Instrument(self._inner.create_up_down_counter(*args, **kwargs))

    def create_histogram(self, *args: Any, **kwargs: Any) -> _Instrument:
        return _Instrument(self._inner.create_histogram(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class HostFreeMeters:
    """A meter provider for the ASGI middleware (its ``meter_provider``): the global
    provider's meters, read when the middleware asks, with :class:`_Meter` around them."""

    def get_meter(
        self,
        name: str,
        version: str | None = None,
        schema_url: str | None = None,
        attributes: Any = None,
    ) -> Any:
        # The global provider as the middleware starts: a proxy until the application sets
        # its own, which then serves the meters handed out before.
        inner = metrics.get_meter_provider().get_meter(name, version, schema_url, attributes)
        return _Meter(inner)
