"""``historyLength`` past what the protocol holds (an int32), or no integer at all, is an
invalid parameter on every binding and version, never an internal error.

a2a-sdk 1.3's 0.3 adapters put the value into an int32 proto field unchecked (JSON-RPC)
and parse the REST query with ``int()`` outside their error handling: JSON-RPC 0.3
answered ``-32603 "Internal error"`` and REST 0.3 HTTP 500, each with an "unhandled
exception" logged at ERROR (a log line with a traceback per request, for anyone).
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from tests._support import TLS
from tests.lifecycle._agent import agent_server
from tests.lifecycle._client import V03, V1, rpc, sse_events, wire_message, wire_message_03

_LAST_RESORT = ("a2a.compat.", "a2a.utils.error_handlers")
#: past int32 either way, and past int64
OUT_OF_RANGE = [2**31, -(2**31) - 1, 2**63]


async def _answer(http: httpx.AsyncClient, path: str, body: Any, headers: dict[str, str]) -> Any:
    """(HTTP status, the JSON answer or the stream's first frame)."""
    if body is None:
        response = await http.get(path, headers=headers)
        return response.status_code, response.json()
    async with http.stream("POST", path, json=body, headers=headers) as response:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return response.status_code, await anext(sse_events(response))
        await response.aread()
        return response.status_code, response.json()


def _calls(task_id: str, value: Any) -> dict[str, tuple[str, Any, dict[str, str]]]:
    config = {"historyLength": value}
    return {
        "jsonrpc-1.0 GetTask": ("/", rpc("GetTask", {"id": task_id, **config}), V1),
        "jsonrpc-0.3 tasks/get": ("/", rpc("tasks/get", {"id": task_id, **config}), V03),
        "jsonrpc-0.3 message/send": (
            "/",
            rpc(
                "message/send",
                {"message": wire_message_03("life.echo", {"text": "x"}), "configuration": config},
            ),
            V03,
        ),
        "jsonrpc-0.3 message/stream": (
            "/",
            rpc(
                "message/stream",
                {"message": wire_message_03("life.echo", {"text": "x"}), "configuration": config},
            ),
            V03,
        ),
        "rest-1.0 GET task": (f"/tasks/{task_id}?historyLength={value}", None, V1),
        "rest-0.3 GET task": (f"/v1/tasks/{task_id}?historyLength={value}", None, V03),
        "rest-0.3 send": (
            "/v1/message:send",
            {"message": wire_message_03("life.echo", {"text": "x"}), "configuration": config},
            V03,
        ),
    }


def _invalid_params(status: int, answer: dict[str, Any], binding: str) -> bool:
    if binding.startswith("rest"):
        return status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT"
    return status == 200 and answer["error"]["code"] == -32602


@pytest.mark.parametrize("value", [*OUT_OF_RANGE, "abc", "1.5"])
async def test_history_length_out_of_range_is_invalid_params(
    caplog: pytest.LogCaptureFixture, value: Any
) -> None:
    async with (
        agent_server(caplog) as agent,
        httpx.AsyncClient(base_url=agent.url, verify=TLS) as http,
    ):
        send = rpc("SendMessage", {"message": wire_message("life.echo", {"text": "x"})})
        task_id = (await http.post("/", json=send, headers=V1)).json()["result"]["task"]["id"]
        answers = {}
        for name, (path, body, headers) in _calls(task_id, value).items():
            if isinstance(value, str) and body is not None:
                continue  # a JSON string is refused as a type by every JSON binding
            answers[name] = await _answer(http, path, body, headers)
        wrong = {
            name: answer
            for name, answer in answers.items()
            if not _invalid_params(*answer, name.split()[0])
        }
        assert wrong == {}
        # One check of a REST query's integers, whatever the version: the same answer.
        assert answers["rest-0.3 GET task"] == answers["rest-1.0 GET task"]
        # The SDK's 0.3 adapters and its last-resort handler log what escaped them.
        escaped = [
            r.getMessage()
            for r in caplog.records
            if r.levelno >= logging.ERROR and r.name.startswith(_LAST_RESORT)
        ]
        assert escaped == []


@pytest.mark.parametrize(
    ("method", "params"),
    [
        # 0.3's models read an integral number or a numeral as an int (pydantic's lax mode)
        ("tasks/get", {"historyLength": 1e10}),
        ("tasks/get", {"historyLength": float(2**31)}),
        ("tasks/get", {"historyLength": "99999999999"}),
        ("message/send", {"configuration": {"historyLength": " 2147483648 "}}),
        # a configuration object beside GetTask's own historyLength (an unknown field)
        ("tasks/get", {"historyLength": 2**31, "configuration": {}}),
    ],
)
async def test_03_history_length_spelt_otherwise_is_invalid_params(
    caplog: pytest.LogCaptureFixture, method: str, params: dict[str, Any]
) -> None:
    # Each was answered -32603 "Internal error" with the SDK's traceback at ERROR: the
    # check took only a JSON integer, and took tasks/get's value from a configuration.
    async with (
        agent_server(caplog) as agent,
        httpx.AsyncClient(base_url=agent.url, verify=TLS) as http,
    ):
        send = rpc("SendMessage", {"message": wire_message("life.echo", {"text": "x"})})
        task_id = (await http.post("/", json=send, headers=V1)).json()["result"]["task"]["id"]
        subject = {"id": task_id}
        if method == "message/send":
            subject = {"message": wire_message_03("life.echo", {"text": "x"})}
        answer = await http.post("/", json=rpc(method, {**subject, **params}), headers=V03)
        assert answer.json()["error"]["code"] == -32602, answer.text
        assert "historyLength" in answer.json()["error"]["message"], answer.text
        assert not [r for r in caplog.records if r.name.startswith(_LAST_RESORT)]
