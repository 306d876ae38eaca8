"""``?A2A-Version=1.0`` is a 1.0 request on JSON-RPC and REST (A2A 1.0.1 §3.6.1).

The first test watches the SDK: a plain a2a-sdk agent reads only the header, so the
parameter alone is taken for 0.3 and a 1.0 call is refused. The day it passes the SDK reads
the parameter and ``apcore_a2a/upstream/version_param.py`` can go.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests._support import TLS, threaded_server
from tests.bindings._agent import serve_agent
from tests.upstream._plain import plain_agent


def _send(skill: str = "demo.echo") -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}],
               "metadata": {"skillId": skill}}  # fmt: skip
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


@pytest.fixture(scope="module")
def ours() -> Iterator[str]:
    with serve_agent() as agent:
        yield agent.url


def test_a_plain_sdk_agent_reads_only_the_header() -> None:
    app, _ = plain_agent()
    with threaded_server(app) as url:
        answer = httpx.post(url + "/?A2A-Version=1.0", json=_send(), timeout=30, verify=TLS).json()
    assert answer["error"]["code"] == -32009  # VersionNotSupportedError: taken for 0.3


def test_the_parameter_serves_1_0_on_json_rpc_and_rest(ours: str) -> None:
    with httpx.Client(base_url=ours, timeout=30, verify=TLS) as http:
        sent = http.post("/?A2A-Version=1.0", json=_send()).json()
        task = sent["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        got = http.get(f"/tasks/{task['id']}", params={"A2A-Version": "1.0"})
        assert (got.status_code, got.json()["id"]) == (200, task["id"])
        listed = http.get("/tasks", params={"a2a-version": "1.0", "pageSize": 5})
        assert listed.status_code == 200
        assert task["id"] in {t["id"] for t in listed.json()["tasks"]}


def test_a_header_wins_over_the_parameter(ours: str) -> None:
    with httpx.Client(base_url=ours, timeout=30, verify=TLS) as http:
        told = http.post("/?A2A-Version=1.0", json=_send(), headers={"A2A-Version": "0.3"})
        assert told.json()["error"]["code"] == -32009
        told = http.post("/?A2A-Version=0.3", json=_send(), headers={"A2A-Version": "1.0"})
        assert "result" in told.json()


@pytest.mark.parametrize("value", ["9.9", "", "1.0%00", "%C3%A9"])
def test_an_unsupported_parameter_is_refused_as_a_header_would_be(ours: str, value: str) -> None:
    with httpx.Client(base_url=ours, timeout=30, verify=TLS) as http:
        answer = http.post(f"/?A2A-Version={value}", json=_send())
        assert answer.status_code == 200
        assert answer.json()["error"]["code"] == -32009
        rest = http.post(
            f"/message:send?A2A-Version={value}", json={"message": _send()["params"]["message"]}
        )
        assert rest.status_code == 400
        assert "Traceback" not in rest.text
