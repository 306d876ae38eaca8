"""The A2A routes: a2a-sdk's route factories (JSON-RPC and REST, 1.0 and 0.3) with the
seam's corrections, and the call-context builder they share, which puts the call record
(``edge/call.py``) into every ``ServerCallContext`` an HTTP call makes."""

from __future__ import annotations

import apcore_a2a.upstream.client_first  # noqa: F401  (before the SDK server: see it)

# isort: split
import functools
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.routes.common import DefaultServerCallContextBuilder
from starlette.requests import Request
from starlette.routing import BaseRoute, Mount, Route

from apcore_a2a.classify import describe, request_info
from apcore_a2a.edge.call import CallRecord, attach
from apcore_a2a.server.caller_keys import CallerKeys
from apcore_a2a.server.guards import until_hung_up
from apcore_a2a.upstream.file_bytes import MESSAGE_PATHS, with_spec_files
from apcore_a2a.upstream.jsonrpc_empty_result import empty_delete_result
from apcore_a2a.upstream.parsed_body import parsed_once
from apcore_a2a.upstream.rest03_push_routes import rest03_push_routes
from apcore_a2a.upstream.rest03_streams import eager_streams


class ApCoreCallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK default builder, unchanged for the caller (``scope["user"]`` and
    ``scope["auth"]``, see ``execution/identity.py``), plus the call record: the caller key
    quotas count by and what the call answers (``streams/tap.py``)."""

    def __init__(self, caller_keys: CallerKeys) -> None:
        super().__init__()
        #: how callers are keyed for quotas (``server/caller_keys.py``)
        self.caller_keys = caller_keys

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        info = request_info(request.scope)
        binding = info.binding if info is not None and info.binding else "internal"
        version = info.version if info is not None and info.version else "0.3"
        method = info.method if info is not None else None
        answer = info.answer if info is not None else None
        caller = self.caller_keys.of_scope(request.scope)
        anonymous = None if context.user.is_authenticated else self.caller_keys.anonymous(caller)
        if anonymous is not None:
            context.user = anonymous
        record = attach(context, CallRecord(binding, version, method, caller, answer=answer))
        record.client_gone = functools.partial(until_hung_up, request.receive)
        return context


def a2a_routes(
    handler: Any, rpc_path: str, context_builder: Any, stream_grace: float
) -> tuple[list[BaseRoute], list[BaseRoute]]:
    """``(JSON-RPC routes, REST routes)`` with the seam's corrections; REST goes last, as
    the SDK also mounts it under ``/{tenant}``, which would take any two-segment path."""
    rpc: list[BaseRoute] = [
        empty_delete_result(parsed_once(route))
        for route in create_jsonrpc_routes(
            handler,
            rpc_url=rpc_path,
            context_builder=context_builder,
            enable_v0_3_compat=True,
            shutdown_grace_period=stream_grace,
        )
    ]
    streams = eager_streams(handler, context_builder, stream_grace)
    # Before the SDK's own 0.3 push routes, push on or off: the SDK's read a spec body as
    # the RPC request and answered an agent without push "No task for" (its empty parent).
    rest: list[BaseRoute] = rest03_push_routes(handler, context_builder)
    for route in create_rest_routes(
        handler,
        context_builder=context_builder,
        enable_v0_3_compat=True,
        shutdown_grace_period=stream_grace,
    ):
        if isinstance(route, Route) and route.path in streams:
            rest.append(Route(route.path, streams[route.path], methods=route.methods))
        elif isinstance(route, Route) and route.path in MESSAGE_PATHS:
            rest.append(Route(route.path, with_spec_files(route.endpoint), methods=route.methods))
        else:
            rest.append(route)
    inner = [r for m in rest if isinstance(m, Mount) for r in m.routes]
    unknown = [
        r.path
        for r in (*rest, *inner)
        if isinstance(r, Route) and describe(r.path, min(r.methods or ("GET",))).kind != "a2a"
    ]
    if unknown:  # served as "other", such a route would skip the A2A checks
        raise RuntimeError(f"a2a-sdk routes unknown to apcore_a2a.classify: {unknown}")
    return rpc, rest
