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
_PLACEHOLDER = "."
_FIELDS = ("text", "url")
_METHODS = frozenset({"SendMessage", "SendStreamingMessage"})

Lifted = list[tuple[int, str, str]]


def _lift(params: Any, placeholder: str = _PLACEHOLDER) -> tuple[Any, Lifted]:
    """*params* with its message's long part strings swapped, and (part, field, string)."""
    message = params.get("message") if isinstance(params, dict) else None
    lifted: Lifted = []
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        return params, lifted
    parts: list[Any] = message["parts"]
    kept = list(parts)
    for index, part in enumerate(parts):
        for name in _FIELDS:
            value = part.get(name) if isinstance(part, dict) else None
            if isinstance(value, str) and len(value) >= LONG:
                kept[index] = part = {**part, name: placeholder}
                lifted.append((index, name, value))
    if not lifted:
        return params, lifted
    return {**params, "message": {**message, "parts": kept}}, lifted


def _lone_surrogate(lifted: Lifted) -> bool:
    try:
        for _index, _name, value in lifted:
            value.encode("utf-8")
    except UnicodeEncodeError:  # json.loads joins pairs: any surrogate left is alone
        return True
    return False


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
        if info.binding == "rest" and info.version != "1.0":
            return await inner(request)
        if info.binding == "jsonrpc":
            payload = info.payload
            if info.rpc_method not in _METHODS or not isinstance(payload, dict):
                return await inner(request)
            params, lifted = _lift(payload.get("params"))
            if lifted:
                info.rewrite_payload({**payload, "params": params})
        else:
            try:
                body = json.loads(info.body or b"")
            except ValueError:
                return await inner(request)  # the SDK answers it
            params, lifted = _lift(body)
            if _lone_surrogate(lifted):
                # protobuf refuses it as before, but from a short string
                params, lifted = _lift(body, "\ud800")[0], []
            if params is not body:
                request = Parsed(request, json.dumps(params).encode(), params)
        if lifted:
            request.scope[LIFTED_KEY] = lifted
        return await inner(request)

    return Route(route.path, endpoint, methods=list(route.methods or ()), name=route.name)


def restore(params: SendMessageRequest, lifted: Lifted | None) -> None:
    """Set the strings :func:`lifting` took out of *params*' parts back on them."""
    for index, name, value in lifted or ():
        setattr(params.message.parts[index], name, value)
