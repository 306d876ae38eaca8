"""The SDK's A2A routes (JSON-RPC 1.0+0.3, REST 1.0+0.3), with upstream's corrections.

* The JSON-RPC endpoint is handed the body the request guard already parsed
  (:mod:`apcore_a2a.upstream.parsed_body`).
* The 0.3 REST streaming endpoints answer request errors before the stream starts
  (:mod:`apcore_a2a.upstream.rest03_streams`), and the 0.3 REST routes carry file bytes
  as the spec says (:mod:`apcore_a2a.upstream.rest03_files`).

REST routes come last: the SDK mounts them under ``/{tenant}`` too, which would otherwise
take any two-segment path (reserved first segments are never a tenant, see
:mod:`apcore_a2a.classify`).
"""

from __future__ import annotations

from typing import Any

from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from starlette.routing import BaseRoute, Mount, Route

from apcore_a2a.classify import describe
from apcore_a2a.upstream.parsed_body import parsed_once
from apcore_a2a.upstream.rest03_files import MESSAGE_PATHS, with_spec_files
from apcore_a2a.upstream.rest03_streams import eager_streams

__all__ = ["a2a_routes"]


def a2a_routes(
    handler: Any, *, rpc_path: str, context_builder: Any, stream_grace: float
) -> tuple[list[BaseRoute], list[BaseRoute]]:
    """``(JSON-RPC routes, REST routes)`` for *handler*; mount REST after everything else."""
    rpc = [
        parsed_once(route)
        for route in create_jsonrpc_routes(
            handler,
            rpc_url=rpc_path,
            context_builder=context_builder,
            enable_v0_3_compat=True,
            shutdown_grace_period=stream_grace,
        )
    ]
    streams = eager_streams(handler, context_builder, stream_grace)
    rest: list[BaseRoute] = []
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
