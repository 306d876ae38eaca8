"""The SDK behaviour ``apcore_a2a/upstream/jsonrpc03_push.py`` answers, on JSON-RPC 0.3:
``tasks/pushNotificationConfig/get`` by task id alone (the 0.3 params' config id is
optional) is refused; and ``jsonrpc_empty_result.py``: a successful
``tasks/pushNotificationConfig/delete`` answers without ``result``, which JSON-RPC 2.0
requires of a success. A failure here means a2a-sdk answers as specified: delete that
correction."""

from __future__ import annotations

from typing import Any

import httpx

from tests._support import TLS, threaded_server
from tests.client._sdk_agent import build_sdk_app


def _rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer: dict[str, Any] = httpx.post(url + "/", json=body, timeout=10, verify=TLS).json()
    return answer


def test_sdk_03_push_get_needs_the_config_id_and_delete_answers_no_result() -> None:
    with threaded_server(build_sdk_app("http://127.0.0.1")) as url:
        message = {"messageId": "m-1", "role": "user", "kind": "message",
                   "parts": [{"kind": "text", "text": "hi"}]}  # fmt: skip
        task = _rpc(url, "message/send", {"message": message})["result"]
        config = {"taskId": task["id"], "pushNotificationConfig": {"url": "https://e.com/h"}}
        created = _rpc(url, "tasks/pushNotificationConfig/set", config)["result"]
        config_id = created["pushNotificationConfig"]["id"]
        by_task = _rpc(url, "tasks/pushNotificationConfig/get", {"id": task["id"]})
        by_both = _rpc(
            url,
            "tasks/pushNotificationConfig/get",
            {"id": task["id"], "pushNotificationConfigId": config_id},
        )
        deleted = _rpc(
            url,
            "tasks/pushNotificationConfig/delete",
            {"id": task["id"], "pushNotificationConfigId": config_id},
        )
    assert config_id == task["id"]  # a config set without an id gets the task's
    assert "result" in by_both
    assert "error" in by_task, by_task
    assert "error" not in deleted and "result" not in deleted, deleted
