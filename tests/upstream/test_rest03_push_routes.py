"""The SDK behaviour ``apcore_a2a/upstream/rest03_push_routes.py`` answers: its 0.3 REST
push-config routes read the body of ``POST /v1/tasks/{id}/pushNotificationConfigs`` as the
whole RPC request (the spec's body, the config, is refused) and have no ``DELETE``. A
failure here means a2a-sdk serves the 0.3 binding as specified: delete that file."""

from __future__ import annotations

import httpx

from tests._support import TLS, threaded_server
from tests.client._sdk_agent import build_sdk_app


def test_sdk_03_push_routes_refuse_the_spec_body_and_have_no_delete() -> None:
    with threaded_server(build_sdk_app("http://127.0.0.1")) as url:
        message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        task = httpx.post(
            url + "/message:send",
            json={"message": message},
            headers={"A2A-Version": "1.0"},
            verify=TLS,
        ).json()["task"]
        configs = f"{url}/v1/tasks/{task['id']}/pushNotificationConfigs"
        spec_body = {
            "name": f"tasks/{task['id']}/pushNotificationConfigs/c1",
            "pushNotificationConfig": {"url": "https://example.com/hook"},
        }
        created = httpx.post(configs, json=spec_body, timeout=10, verify=TLS)
        deleted = httpx.delete(configs + "/c1", timeout=10, verify=TLS)
    assert created.status_code == 400
    assert "No task for" in created.text
    assert deleted.status_code >= 400
