"""A JSON-RPC ``DeleteTaskPushNotificationConfig`` success answers its result: ``{}`` on
1.0, ``null`` on 0.3.

The method returns ``google.protobuf.Empty`` (``a2a.proto``; spec §10.4.10), whose
ProtoJSON is ``{}``; a2a-sdk 1.3's dispatcher returns ``None`` for it, which the JSON-RPC
envelope renders ``"result": null``, and a peer that parses the result as the proto's
``Empty`` refuses it. The REST route already answers ``{}``, gRPC an ``Empty``. 0.3's
``tasks/pushNotificationConfig/delete`` returns ``null``, which a2a-sdk 1.3's 0.3 adapter
leaves out (``exclude_none``): an answer without ``result`` (JSON-RPC 2.0 requires it).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from apcore_a2a.classify import request_info

#: each version's delete method -> its success result
RESULTS: dict[str, dict[str, Any] | None] = {
    "DeleteTaskPushNotificationConfig": {},
    "tasks/pushNotificationConfig/delete": None,
}

Endpoint = Callable[[Request], Awaitable[Response]]


def empty_delete_result(route: Route) -> Route:
    """*route* (the SDK's JSON-RPC route) answering a successful delete its result."""
    inner: Endpoint = route.endpoint

    async def endpoint(request: Request) -> Response:
        response = await inner(request)
        info = request_info(request.scope)
        if info is None or not isinstance(response, JSONResponse):
            return response
        _ = info.payload  # the body the record parsed once, which names rpc_method
        if info.rpc_method not in RESULTS:
            return response
        answer = json.loads(bytes(response.body))
        if not isinstance(answer, dict) or "error" in answer or answer.get("result") is not None:
            return response
        answer["result"] = RESULTS[info.rpc_method]
        kept = {k: v for k, v in response.headers.items() if k != "content-length"}
        return JSONResponse(answer, response.status_code, headers=kept)

    return Route(route.path, endpoint, methods=list(route.methods or ()), name=route.name)
