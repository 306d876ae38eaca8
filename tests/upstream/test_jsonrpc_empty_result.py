"""The SDK behaviour ``apcore_a2a/upstream/jsonrpc_empty_result.py`` answers: a2a-sdk's
JSON-RPC 1.0 ``DeleteTaskPushNotificationConfig`` succeeds with ``"result": null``, though
the method returns ``google.protobuf.Empty`` (``{}`` in ProtoJSON). A failure of the first
test means the SDK answers ``{}`` itself: delete that file. The second shows ours answers
``{}`` on JSON-RPC 1.0 as REST does, a failed delete stays an error, and 0.3 keeps its
``null``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.protobuf import empty_pb2, json_format

from tests._support import TLS, threaded_server
from tests.bindings._agent import Agent, serve_agent
from tests.bindings._scenarios import HOOK_URL
from tests.client._sdk_agent import build_sdk_app

V1 = {"A2A-Version": "1.0"}
MESSAGE = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}],
           "metadata": {"skillId": "demo.echo"}}  # fmt: skip


def _rpc(url: str, method: str, params: dict[str, Any], headers: dict[str, str]) -> Any:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return httpx.post(url + "/", json=body, headers=headers, timeout=30, verify=TLS).json()


def _task_with_config(url: str, config_id: str) -> str:
    """A finished task of the agent at *url* with a push config *config_id* (1.0 calls)."""
    task = _rpc(url, "SendMessage", {"message": MESSAGE}, V1)["result"]["task"]["id"]
    config = {"taskId": task, "id": config_id, "url": HOOK_URL}
    created = _rpc(url, "CreateTaskPushNotificationConfig", config, V1)
    assert "result" in created, created
    return str(task)


def test_sdk_answers_a_jsonrpc_1_0_delete_with_a_null_result() -> None:
    with threaded_server(build_sdk_app("http://127.0.0.1")) as url:
        task = _task_with_config(url, "c-1")
        deleted = _rpc(url, "DeleteTaskPushNotificationConfig", {"taskId": task, "id": "c-1"}, V1)
    assert deleted == {"jsonrpc": "2.0", "id": 7, "result": None}


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    with serve_agent(push_notifications=True, push_allow_insecure_urls=True) as running:
        yield running


def test_our_jsonrpc_1_0_delete_answers_an_empty_message(agent: Agent) -> None:
    task = _task_with_config(agent.url, "c-1")
    params = {"taskId": task, "id": "c-1"}
    deleted = _rpc(agent.url, "DeleteTaskPushNotificationConfig", params, V1)
    assert deleted == {"jsonrpc": "2.0", "id": 7, "result": {}}
    json_format.ParseDict(deleted["result"], empty_pb2.Empty(), ignore_unknown_fields=False)
    listed = _rpc(agent.url, "ListTaskPushNotificationConfigs", {"taskId": task}, V1)
    assert listed["result"].get("configs", []) == []
    # as REST answers the same delete
    other = _task_with_config(agent.url, "c-2")
    rest = httpx.delete(
        f"{agent.url}/tasks/{other}/pushNotificationConfigs/c-2", headers=V1, verify=TLS
    )
    assert (rest.status_code, rest.json()) == (200, {})
    assert (
        _rpc(agent.url, "ListTaskPushNotificationConfigs", {"taskId": other}, V1)["result"].get(
            "configs", []
        )
        == []
    )


def test_a_failed_delete_and_the_0_3_delete_are_untouched(agent: Agent) -> None:
    unknown = {"taskId": "no-such-task", "id": "c-1"}
    refused = _rpc(agent.url, "DeleteTaskPushNotificationConfig", unknown, V1)
    assert "result" not in refused and refused["error"]["code"] == -32001, refused
    # without A2A-Version the 1.0 name is refused (spec §3.6.2), not answered {}
    unversioned = _rpc(agent.url, "DeleteTaskPushNotificationConfig", unknown, {})
    assert "result" not in unversioned and unversioned["error"]["code"] == -32009, unversioned
    task = _task_with_config(agent.url, "c-3")
    legacy = {"id": task, "pushNotificationConfigId": "c-3"}
    deleted = _rpc(agent.url, "tasks/pushNotificationConfig/delete", legacy, {})
    assert deleted == {"jsonrpc": "2.0", "id": 7, "result": None}
