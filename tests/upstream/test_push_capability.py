"""The SDK behaviour ``apcore_a2a/upstream/push_capability.py`` answers: an a2a-sdk agent
without push notifications serves a message that asks for them and drops its push config
(spec §3.3.4 wants ``PushNotificationNotSupportedError``). A failure here means the SDK
refuses such a message itself: delete that file."""

from __future__ import annotations

import httpx

from tests._support import TLS, threaded_server
from tests.client._sdk_agent import build_sdk_app


def test_sdk_serves_a_message_with_a_push_config_without_push() -> None:
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    push = {"taskPushNotificationConfig": {"url": "https://example.com/hook"}}
    with threaded_server(build_sdk_app("http://127.0.0.1", push=False)) as url:
        answer = httpx.post(
            url + "/message:send",
            json={"message": message, "configuration": push},
            headers={"A2A-Version": "1.0"},
            timeout=10,
            verify=TLS,
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
