"""A message's long strings set on the parsed request instead of passing protobuf's JSON parser.

Upstream (protobuf 7 ``json_format``, which a2a-sdk 1.3's 1.0 JSON-RPC and REST routes
parse requests with): every string is searched for unpaired UTF-16 surrogates with a
regular expression costing about 65 ms per MB, on the event loop: one 10 MB text part held
every other request for 0.65 s. The request guard has already refused lone surrogates
(``server/guards.py``; REST bodies are checked here). So before the SDK parses a
``SendMessage``, the text and url of its long parts are swapped for a placeholder; the
request handler sets them on the parsed message (upb checks the UTF-8 in C). Watched by
``tests/upstream/test_long_strings.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from a2a.types import SendMessageRequest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from apcore_a2a.classify import request_info
from apcore_a2a.upstream.parsed_body import Endpoint, Parsed

#: Shorter strings cost protobuf under 4 ms each (and the body's other strings are short).
LONG = 64 * 1024
#: ``ServerCallContext.state`` key (and scope key) of the strings a request's parts lost.
LIFTED_KEY = "apcore_a2a.lifted_strings"
_FIELDS = ("text", "url")
# A surrogate reaches a parsed string only as an escape (raw ones are not UTF-8).
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_METHODS = frozenset({"SendMessage", "SendStreamingMessage"})

Lifted = list[tuple[int, str, str]]


def _lift(params: Any, check: bool = False) -> tuple[Any, Lifted]:
    """*params* with its message's long part strings swapped, and (part, field, string) of
    each; one holding a lone surrogate becomes a lone surrogate, for protobuf to refuse."""
    message: Any = params.get("message") if isinstance(params, dict) else None
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return params, []
    kept, lifted, swapped = list(parts), [], False
    for index, part in enumerate(parts):
        for name in _FIELDS:
            value = part.get(name) if isinstance(part, dict) else None
            if isinstance(value, str) and len(value) >= LONG:
                whole = not check or _utf8(value)
                kept[index] = part = {**part, name: "." if whole else "\ud800"}
                lifted += [(index, name, value)] * whole
                swapped = True
    if not swapped:
        return params, lifted
    return {**params, "message": {**message, "parts": kept}}, lifted


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # json.loads joins pairs: a surrogate left is a lone one
        return False
    return True


def lifting(route: BaseRoute) -> BaseRoute:
    """*route* (the 1.0 JSON-RPC route or a 1.0 REST message route, or a mount of them)
    handing the SDK a ``SendMessage`` without its long part strings."""
    if isinstance(route, Mount):
        return Mount(route.path, routes=[lifting(r) for r in route.routes], name=route.name)
    if not isinstance(route, Route):
        return route
    inner: Endpoint = route.endpoint

    async def endpoint(request: Request) -> Response:
        info = request_info(request.scope)
        if info is None or info.method not in _METHODS or len(info.body or b"") < LONG:
            return await inner(request)
        if info.binding == "jsonrpc" and info.rpc_method in _METHODS:
            payload = info.payload  # without lone surrogates: the guard refused those
            params, lifted = _lift(payload.get("params"))
            if lifted:
                info.rewrite_payload({**payload, "params": params})
        elif info.binding == "rest" and info.version == "1.0":
            try:
                body = json.loads(info.body or b"")
            except ValueError:
                return await inner(request)  # the SDK answers it
            params, lifted = _lift(body, bool(_ESCAPED_SURROGATE.search(info.body or b"")))
            if params is not body:
                request = Parsed(request, json.dumps(params).encode(), params)
        else:
            return await inner(request)
        if lifted:
            request.scope[LIFTED_KEY] = lifted
        return await inner(request)

    return Route(route.path, endpoint, methods=list(route.methods or ()), name=route.name)


def restore(params: SendMessageRequest, lifted: Lifted | None) -> None:
    """Set the strings :func:`lifting` took out of *params*' parts back on them."""
    for index, name, value in lifted or ():
        setattr(params.message.parts[index], name, value)
