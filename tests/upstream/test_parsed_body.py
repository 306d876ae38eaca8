"""Watch: a2a-sdk's JSON-RPC route reads its body through ``request.json()``.

``apcore_a2a.upstream.parsed_body`` relies on it to hand over the body the guard parsed.
The day the SDK reads the body another way, the first test fails: the correction must
then find the SDK's new way in (or go).
"""

from __future__ import annotations

import json
from typing import Any

from a2a.server.routes import create_jsonrpc_routes
from starlette.requests import Request
from starlette.types import Message


class _Handed(Request):
    async def json(self) -> Any:
        return {"jsonrpc": "2.0", "id": 41, "method": "NoSuchMethod"}


def _request(cls: type[Request]) -> Request:
    async def receive() -> Message:
        return {"type": "http.request", "body": b"{not json", "more_body": False}

    scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b""}
    return cls(scope, receive)


async def test_the_sdk_jsonrpc_route_reads_the_body_through_request_json() -> None:
    (route,) = create_jsonrpc_routes(object(), rpc_url="/")  # type: ignore[arg-type]
    answer = json.loads(bytes((await route.endpoint(_request(_Handed))).body))
    # The handed object was read (its id and method), not the body on the wire.
    assert answer["id"] == 41
    assert answer["error"]["code"] == -32601


async def test_without_the_hand_over_the_sdk_parses_the_wire_body() -> None:
    (route,) = create_jsonrpc_routes(object(), rpc_url="/")  # type: ignore[arg-type]
    answer = json.loads(bytes((await route.endpoint(_request(Request))).body))
    assert answer["error"]["code"] == -32700
