"""JSON-RPC 1.0 ``DeleteTaskPushNotificationConfig`` answers ``"result": {}``.

The method returns ``google.protobuf.Empty`` (``a2a.proto``; spec §10.4.10), whose
ProtoJSON is ``{}``; a2a-sdk 1.3's dispatcher returns ``None`` for it, which the JSON-RPC
envelope renders ``"result": null``, and a peer that parses the result as the proto's
``Empty`` refuses it. The REST route already answers ``{}``, gRPC an ``Empty``; JSON-RPC
0.3's ``null`` is 0.3's own (``jsonrpc03_push.py``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from apcore_a2a.classify import request_info

METHOD = "DeleteTaskPushNotificationConfig"

Endpoint = Callable[[Request], Awaitable[Response]]


def empty_delete_result(route: Route) -> Route:
    """*route* (the SDK's JSON-RPC route) answering a successful 1.0 delete ``{}``."""
    inner: Endpoint = route.endpoint

    async def endpoint(request: Request) -> Response:
        response = await inner(request)
        info = request_info(request.scope)
        if info is None or not isinstance(response, JSONResponse):
            return response
        _ = info.payload  # the body the record parsed once, which names rpc_method
        # The 1.0 name only: 0.3's delete is tasks/pushNotificationConfig/delete.
        if info.rpc_method != METHOD:
            return response
        answer = json.loads(bytes(response.body))
        if not isinstance(answer, dict) or "result" not in answer or answer["result"] is not None:
            return response
        answer["result"] = {}
        kept = {k: v for k, v in response.headers.items() if k != "content-length"}
        return JSONResponse(answer, response.status_code, headers=kept)

    return Route(route.path, endpoint, methods=list(route.methods or ()), name=route.name)
