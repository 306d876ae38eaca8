"""JSON-RPC 0.3 push configs: ``get`` by task id alone names the config id defaulted to the
task id; a ``delete`` success gets its ``"result": null``. Other requests pass unbuffered.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apcore_a2a.classify import request_info

GET = "tasks/pushNotificationConfig/get"
DELETE = "tasks/pushNotificationConfig/delete"


def with_config_id(rpc_method: str | None, doc: Any) -> bool:
    """Name the config id of a 0.3 ``get`` by task id alone in *doc* (the request, in
    place); ``True`` when it did."""
    params = doc.get("params") if rpc_method == GET and isinstance(doc, dict) else None
    if not isinstance(params, dict) or not params.get("id"):
        return False
    if params.get("pushNotificationConfigId"):
        return False
    params["pushNotificationConfigId"] = params["id"]
    return True


def with_result(doc: Any) -> None:
    """Give a 0.3 ``delete``'s success answer *doc* its ``"result": null`` (in place)."""
    if isinstance(doc, dict) and "error" not in doc:
        doc.setdefault("result", None)


class JsonRpc03PushCorrections:
    """Route middleware: the two corrections above, on JSON-RPC 0.3 ``get`` and ``delete``
    only (the JSON-RPC body was parsed once by the layers before; see ``classify``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        info = request_info(scope) if scope["type"] == "http" else None
        if info is None or info.binding != "jsonrpc":
            await self.app(scope, receive, send)
            return
        doc = info.payload  # parsed once, on first use
        if info.rpc_method == GET and with_config_id(GET, doc):
            info.rewrite_payload(doc)
        elif info.rpc_method == DELETE:
            await self.app(scope, receive, _delete_answer(send))
            return
        await self.app(scope, receive, send)


def _delete_answer(send: Send) -> Send:
    """A ``send`` that holds a 0.3 ``delete``'s small answer and adds its ``result``."""
    start: Message | None = None
    chunks: list[bytes] = []

    async def held(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
            return
        if message["type"] != "http.response.body" or start is None:
            await send(message)  # pragma: no cover - no trailers on this answer
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        body = b"".join(chunks)
        if start["status"] == 200:
            try:
                doc = json.loads(body)
            except ValueError:
                doc = None
            if isinstance(doc, dict) and "result" not in doc and "error" not in doc:
                with_result(doc)
                body = json.dumps(doc, separators=(",", ":")).encode()
        headers = MutableHeaders(raw=list(start.get("headers", [])))
        headers["content-length"] = str(len(body))
        await send({**start, "headers": headers.raw})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    return held
