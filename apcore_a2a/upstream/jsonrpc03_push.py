"""JSON-RPC 0.3 push configs: ``get`` by task id alone names the config id defaulted to the
task id (a ``delete`` success's ``"result": null``: ``jsonrpc_empty_result.py``).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from apcore_a2a.classify import request_info

GET = "tasks/pushNotificationConfig/get"
CONFIG_ID = "pushNotificationConfigId"


class JsonRpc03PushCorrections:
    """Route middleware: the correction above, on JSON-RPC 0.3 ``get`` only (the JSON-RPC
    body was parsed once by the layers before; see ``classify``)."""

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
        await self.app(scope, receive, send)
