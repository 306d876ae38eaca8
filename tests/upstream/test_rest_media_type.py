"""The SDK behaviour ``apcore_a2a/upstream/rest_media_type.py`` answers: REST answers in
``application/a2a+json``. A failure here means a2a-sdk answers ``application/json`` (the
HTTP+JSON binding's media type) itself now: delete that file."""

from __future__ import annotations

import httpx

from tests._support import threaded_server
from tests.upstream._plain import plain_agent


def test_sdk_rest_answers_in_a2a_json() -> None:
    app, _grpc_port = plain_agent()
    with threaded_server(app) as url:
        message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        response = httpx.post(
            url + "/message:send",
            json={"message": message},
            headers={"A2A-Version": "1.0", "Accept": "application/json"},
            timeout=10,
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/a2a+json")
