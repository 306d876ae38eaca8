"""JSON-RPC 0.3 push-config calls as A2A 0.3 has them (a2a-sdk 1.3 answers two otherwise).

0.3's ``GetTaskPushNotificationConfigParams`` makes the config id optional: by task id
alone, ``get`` means the config whose id defaulted to the task id, but a2a-sdk 1.3 turns it
into the 1.0 request, which needs the config id, and refuses it. And a successful
``tasks/pushNotificationConfig/delete`` leaves without ``result``, which JSON-RPC 2.0
requires of a success (0.3's schema: ``null``). The push-config answer middleware
(``push/responses.py``), which holds the parsed request and answer anyway, applies both.
``tests/upstream/test_jsonrpc03_push.py`` fails when the SDK answers both as specified.
"""

from __future__ import annotations

from typing import Any

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
