"""Adds the delivery status to push-config answers where the protocol's shape allows it.

The SDK answers the config methods from the protobuf ``TaskPushNotificationConfig``, which
has no status; this ASGI middleware rewrites only those answers (the call is read from the
request record, :mod:`apcore_a2a.classify`; other requests pass untouched, unbuffered),
as docs/push.md "Response shapes" lists: 1.0 and JSON-RPC 0.3 configs gain ``status`` and
``statusReason``; REST 0.3 stays exact (the 0.3 Python client parses it as protobuf and
rejects unknown members). On the way it applies the seam's two JSON-RPC 0.3 corrections
(``upstream/jsonrpc03_push.py``: ``get`` by task id alone, ``delete``'s ``"result": null``).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apcore_a2a.classify import request_info
from apcore_a2a.push.bodies import dumps
from apcore_a2a.push.status import ACTIVE, FAILED, ConfigStatusBook
from apcore_a2a.upstream.jsonrpc03_push import DELETE, with_config_id, with_result

_CONFIG_METHODS = {
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
}


class PushResponseMiddleware:
    """ASGI middleware merging :class:`ConfigStatusBook` entries into config responses."""

    def __init__(self, app: ASGIApp, *, statuses: ConfigStatusBook) -> None:
        self.app = app
        self.statuses = statuses

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        info = request_info(scope) if scope["type"] == "http" else None
        if (
            info is None
            or info.method not in _CONFIG_METHODS
            or (info.binding == "rest" and info.version == "0.3")
            or (info.binding == "rest" and info.method == "DeleteTaskPushNotificationConfig")
        ):
            await self.app(scope, receive, send)
            return
        doc = info.payload  # None for REST (and its rpc_method too)
        if with_config_id(info.rpc_method, doc):
            info.rewrite_payload(doc)
        await self._rewrite(scope, receive, send, rpc_method=info.rpc_method)

    async def _rewrite(
        self, scope: Scope, receive: Receive, send: Send, *, rpc_method: str | None
    ) -> None:
        start: Message | None = None
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            else:  # pragma: no cover - trailers are not used by these endpoints
                await send(message)

        await self.app(scope, receive, capture)
        if start is None:
            return
        body = b"".join(chunks)
        if start["status"] == 200:
            body = await self._augment(body, rpc_method=rpc_method)
        headers = MutableHeaders(raw=list(start.get("headers", [])))
        headers["content-length"] = str(len(body))
        await send({**start, "headers": headers.raw})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _augment(self, body: bytes, *, rpc_method: str | None) -> bytes:
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        if rpc_method == DELETE:
            with_result(doc)
        elif rpc_method is None or isinstance(doc, dict):
            await self._decorate(doc if rpc_method is None else doc.get("result"), {})
        return dumps(doc)

    async def _decorate(self, value: Any, cache: dict[str, dict[str, str]]) -> None:
        """Add status fields to a config, a list of configs, or ``{"configs": [...]}``."""
        if isinstance(value, dict) and isinstance(value.get("configs"), list):
            value = value["configs"]
        if isinstance(value, list):
            for item in value:
                await self._decorate(item, cache)
            return
        if not isinstance(value, dict):
            return
        inner = value.get("pushNotificationConfig")
        if isinstance(inner, dict):
            task_id, config_id = str(value.get("taskId") or ""), inner.get("id")
        elif "url" in value and "taskId" in value:
            task_id, config_id = str(value["taskId"]), value.get("id")
        else:
            return
        if task_id not in cache:
            cache[task_id] = await self.statuses.failed.read(task_id)
        reason = cache[task_id].get(str(config_id or task_id))
        value["status"] = ACTIVE if reason is None else FAILED
        if reason is not None:
            value["statusReason"] = reason
