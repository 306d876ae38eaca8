"""A JSON-RPC 0.3 call whose envelope is valid but whose ``params`` are not is answered
``-32602 Invalid params`` (JSON-RPC 2.0 §5.1), as the genuine a2a-sdk 0.3 server answers
it; an invalid envelope stays ``-32600 Invalid Request``.

a2a-sdk 1.3's 0.3 adapter validates the whole request with pydantic and answered every
failure ``-32600`` (``upstream/v03_invalid_params.py``).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests._support import TLS
from tests.lifecycle._agent import agent_server
from tests.lifecycle._client import V03, rpc, wire_message_03


def _bad_role() -> dict[str, Any]:
    return {"message": {**wire_message_03("life.echo", {"text": "x"}), "role": "robot"}}


#: (name, request body, the code it is answered)
CASES: list[tuple[str, dict[str, Any], int]] = [
    ("tasks/get historyLength 1.5", rpc("tasks/get", {"id": "x", "historyLength": 1.5}), -32602),
    ("tasks/get without id", rpc("tasks/get", {}), -32602),
    ("tasks/get without params", {"jsonrpc": "2.0", "id": 1, "method": "tasks/get"}, -32602),
    ("message/send bad role", rpc("message/send", _bad_role()), -32602),
    ("message/stream bad role", rpc("message/stream", _bad_role()), -32602),
    ("tasks/cancel id an object", rpc("tasks/cancel", {"id": {"a": 1}}), -32602),
    ("no method", {"jsonrpc": "2.0", "id": 1, "params": {"id": "x"}}, -32600),
    ("jsonrpc 1.0", {**rpc("tasks/get", {"id": "x"}), "jsonrpc": "1.0"}, -32600),
    ("id a fraction", rpc("tasks/get", {"id": "x"}, rid=1.5), -32600),  # type: ignore[arg-type]
    # The envelope is invalid as well as the params: the request is.
    ("id a fraction, bad params", rpc("tasks/get", {"id": 7}, rid=1.5), -32600),  # type: ignore[arg-type]
]


async def test_bad_03_params_are_invalid_params_and_a_bad_envelope_an_invalid_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with (
        agent_server(caplog) as agent,
        httpx.AsyncClient(base_url=agent.url, verify=TLS) as http,
    ):
        answered = {}
        for name, body, _code in CASES:
            response = await http.post("/", json=body, headers=V03)
            assert response.status_code == 200, (name, response.text)
            answered[name] = response.json()["error"]["code"]
    assert answered == {name: code for name, _body, code in CASES}


async def test_invalid_params_name_the_parameter(caplog: pytest.LogCaptureFixture) -> None:
    async with (
        agent_server(caplog) as agent,
        httpx.AsyncClient(base_url=agent.url, verify=TLS) as http,
    ):
        body = rpc("tasks/get", {"id": "x", "historyLength": 1.5}, rid="r-7")
        answer = (await http.post("/", json=body, headers=V03)).json()
    assert answer["id"] == "r-7"
    error = answer["error"]
    assert error["code"] == -32602
    assert error["message"] == "Invalid parameters"  # a2a-sdk 0.3's wording
    assert [d["loc"] for d in error["data"]] == [["params", "historyLength"]]
    assert "1.5" not in str(error["data"])  # the input is not echoed
