"""JSON-RPC 0.3 push configs: ``get`` by task id alone names the config id defaulted to the
task id; a ``delete`` success gets its ``"result": null``. Other requests pass unbuffered.
"""

from __future__ import annotations

import json

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apcore_a2a.classify import request_info

GET = "tasks/pushNotificationConfig/get"
DELETE = "tasks/pushNotificationConfig/delete"
CONFIG_ID = "pushNotificationConfigId"


class JsonRpc03PushCorrections:
    """Route middleware: the two corrections above, on JSON-RPC 0.3 ``get`` and ``delete``
    only (the JSON-RPC body was parsed once by the layers before; see ``classify``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        info = request_info(scope) if scope["type"] == "http" else None
        if info is not None and info.binding == "jsonrpc" and info.rpc_method == GET:
            doc = info.payload  # parsed once, on first use
            params = doc.get("params") if isinstance(doc, dict) else None
            if isinstance(params, dict) and params.get("id") and not params.get(CONFIG_ID):
                params[CONFIG_ID] = params["id"]
                info.rewrite_payload(doc)
        elif info is not None and info.binding == "jsonrpc" and info.rpc_method == DELETE:
            send = _delete_answer(send)
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
                doc["result"] = None
                body = json.dumps(doc, separators=(",", ":")).encode()
        headers = MutableHeaders(raw=list(start.get("headers", [])))
        headers["content-length"] = str(len(body))
        await send({**start, "headers": headers.raw})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    return held
