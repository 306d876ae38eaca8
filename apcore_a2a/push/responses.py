"""Adds the delivery status to push-config responses on every binding.

The SDK answers the config methods from the protobuf ``TaskPushNotificationConfig``, which
has no status. This ASGI middleware rewrites only those answers, adding fields that
official clients ignore (both the 1.0 and the 0.3 SDK clients parse leniently):

* 1.0 (JSON-RPC ``Create/Get/ListTaskPushNotificationConfig(s)``, REST
  ``/tasks/{id}/pushNotificationConfigs``): each config gains ``status`` (``active`` |
  ``failed``) and, when failed, ``statusReason``;
* 0.3 (``tasks/pushNotificationConfig/set|get|list``, REST ``/v1/...``): each config
  keeps the standard ``{"taskId", "pushNotificationConfig"}`` and also carries ``taskId``,
  ``url`` and ``status`` at the top level; ``tasks/pushNotificationConfig/delete``
  answers ``{"taskId", "deleted": true}`` instead of an empty result, and
  ``tasks/pushNotificationConfig/get`` with only the task id (allowed in 0.3) is answered
  with the config whose id defaulted to the task id.

Every other request passes through untouched and unbuffered.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apcore_a2a.push.status import ACTIVE, FAILED, ConfigStatusBook

__all__ = ["PushResponseMiddleware"]

_RPC_METHODS = {
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "tasks/pushNotificationConfig/set",
    "tasks/pushNotificationConfig/get",
    "tasks/pushNotificationConfig/list",
    "tasks/pushNotificationConfig/delete",
}
_V03_DELETE = "tasks/pushNotificationConfig/delete"
_V03_GET = "tasks/pushNotificationConfig/get"
# Optional tenant segment and/or the 0.3 "/v1" prefix before the SDK's REST paths.
_REST_PATH = re.compile(r"^(?:/[^/]+){0,2}/tasks/[^/]+/pushNotificationConfigs(?:/[^/]+)?/?$")
_NAME = re.compile(r"^tasks/([^/]+)/pushNotificationConfigs/([^/]+)$")
# Cheap pre-filter so ordinary JSON-RPC calls are not parsed twice.
_MARKER = b"ushNotificationConfig"


class PushResponseMiddleware:
    """ASGI middleware merging :class:`ConfigStatusBook` entries into config responses."""

    def __init__(self, app: ASGIApp, *, statuses: ConfigStatusBook, rpc_path: str = "/") -> None:
        self.app = app
        self.statuses = statuses
        self.rpc_path = rpc_path.rstrip("/") or "/"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        method: str = scope["method"]
        if method in ("GET", "POST") and _REST_PATH.match(path):
            await self._rewrite(scope, receive, send, rpc_method=None, rpc_params={})
            return
        if method == "POST" and (path.rstrip("/") or "/") == self.rpc_path:
            body, pending = await _read_body(receive)
            rpc = _rpc_call(body)
            if rpc is None:
                await self.app(scope, _replay(body, pending, receive), send)
                return
            rpc_method, params, fixed = rpc
            if fixed is not None:
                body = fixed
                scope = {**scope, "headers": _with_length(scope["headers"], len(body))}
            await self._rewrite(
                scope,
                _replay(body, pending, receive),
                send,
                rpc_method=rpc_method,
                rpc_params=params,
            )
            return
        await self.app(scope, receive, send)

    async def _rewrite(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        *,
        rpc_method: str | None,
        rpc_params: dict[str, Any],
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
            body = await self._augment(body, rpc_method=rpc_method, rpc_params=rpc_params)
        headers = MutableHeaders(raw=list(start.get("headers", [])))
        headers["content-length"] = str(len(body))
        await send({**start, "headers": headers.raw})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _augment(
        self, body: bytes, *, rpc_method: str | None, rpc_params: dict[str, Any]
    ) -> bytes:
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        cache: dict[str, dict[str, str]] = {}
        if rpc_method is None:
            doc = await self._decorate(doc, cache)
        elif isinstance(doc, dict) and "error" not in doc:
            if rpc_method == _V03_DELETE:
                doc["result"] = {"taskId": rpc_params.get("id"), "deleted": True}
            elif "result" in doc:
                doc["result"] = await self._decorate(doc["result"], cache)
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    async def _decorate(self, value: Any, cache: dict[str, dict[str, str]]) -> Any:
        """Add status fields to a config, a list of configs, or ``{"configs": [...]}``."""
        if isinstance(value, list):
            return [await self._decorate(item, cache) for item in value]
        if not isinstance(value, dict):
            return value
        if isinstance(value.get("configs"), list):
            value["configs"] = [await self._decorate(item, cache) for item in value["configs"]]
            return value
        inner = value.get("pushNotificationConfig")
        if isinstance(inner, dict):
            task_id = value.get("taskId")
            config_id = inner.get("id")
            match = _NAME.match(str(value.get("name", "")))
            if match:
                task_id = task_id or match.group(1)
                config_id = config_id or match.group(2)
            task_id = task_id or ""
            value.setdefault("taskId", task_id)
            value.setdefault("url", inner.get("url"))
        elif "url" in value and "taskId" in value:
            task_id = str(value["taskId"])
            config_id = value.get("id")
        else:
            return value
        task_key = str(task_id)
        if task_key not in cache:
            cache[task_key] = await self.statuses.failures(task_key)
        reason = cache[task_key].get(str(config_id or task_id))
        value["status"] = ACTIVE if reason is None else FAILED
        if reason is not None:
            value["statusReason"] = reason
        return value


async def _read_body(receive: Receive) -> tuple[bytes, Message | None]:
    """The whole request body, plus a disconnect message that arrived instead of it."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), None


def _replay(body: bytes, pending: Message | None, receive: Receive) -> Receive:
    """A ``receive`` that hands out *body* (or the early disconnect) once, then delegates."""
    used = False

    async def replay() -> Message:
        nonlocal used
        if used:
            return await receive()
        used = True
        if pending is not None:
            return pending
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _with_length(headers: list[tuple[bytes, bytes]], length: int) -> list[tuple[bytes, bytes]]:
    kept = [(k, v) for k, v in headers if k.lower() != b"content-length"]
    return [*kept, (b"content-length", str(length).encode())]


def _rpc_call(body: bytes) -> tuple[str, dict[str, Any], bytes | None] | None:
    """``(method, params, rewritten body or None)`` for a JSON-RPC push-config call."""
    if _MARKER not in body:
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("method") not in _RPC_METHODS:
        return None
    method = str(doc["method"])
    params = doc.get("params")
    if not isinstance(params, dict):
        return method, {}, None
    fixed: bytes | None = None
    if method == _V03_GET and params.get("id") and not params.get("pushNotificationConfigId"):
        # 0.3 allowed get by task id alone (the config whose id defaulted to the task id);
        # the SDK's 1.0 request needs the config id, so fill it in.
        params["pushNotificationConfigId"] = params["id"]
        fixed = json.dumps(doc).encode("utf-8")
    return method, params, fixed
