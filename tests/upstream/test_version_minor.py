"""The SDK behaviour the version rule (``apcore_a2a/classify.py:version_error``) answers
beside its own check: a plain a2a-sdk agent serves ``A2A-Version: 1.1`` as 1.0 on HTTP (it
compares majors alone), where A2A 1.0.1 §3.6.2 has a request's ``Major.Minor`` served or
refused. A failure here means the SDK compares ``Major.Minor`` itself."""

from __future__ import annotations

import httpx

from tests._support import TLS, threaded_server
from tests.client._sdk_agent import build_sdk_app


def test_sdk_serves_another_minor_version_as_its_own() -> None:
    with threaded_server(build_sdk_app("http://127.0.0.1")) as url:
        answer = httpx.get(
            url + "/tasks/nope", headers={"A2A-Version": "1.1"}, timeout=10, verify=TLS
        )
    reasons = [d.get("reason") for d in answer.json()["error"]["details"]]
    assert (answer.status_code, reasons) == (404, ["TASK_NOT_FOUND"])  # reached the handler
