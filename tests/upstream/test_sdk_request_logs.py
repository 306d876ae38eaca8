"""Watch: a2a-sdk logs a record, at WARNING or ERROR, for each client error it answers.

Sent beside each other, to a plain a2a-sdk agent and to ours in one process: requests a
client gets wrong on JSON-RPC 1.0 (envelope, method, params), JSON-RPC 0.3 (params) and
REST (an unknown task), each carrying an attacker's text. The plain agent's requests are
logged as the SDK logs them, one or two records a request, at WARNING and ERROR, repeating
the text: the day the SDK stops, the first test fails and
``apcore_a2a/upstream/sdk_request_logs.py`` can go. Ours are DEBUG records
(docs/operations.md, *Logs*), and nothing changes for the plain agent.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import httpx
import pytest

from tests._support import TLS, threaded_server
from tests.bindings._agent import serve_agent
from tests.upstream._plain import plain_agent

MARK = "ATTACKER-TEXT"
V1 = {"A2A-Version": "1.0"}
SDK_LOGGERS = (
    "a2a.server.routes.jsonrpc_dispatcher",
    "a2a.compat.v0_3.jsonrpc_adapter",
    "a2a.utils.error_handlers",
)


def _rpc(method: str, params: dict[str, Any], **envelope: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params, **envelope}


#: (what a client got wrong, the request: path, JSON body or None for a GET, headers);
#: a ``historyLength`` of a type the SDK refuses itself (a string spelling no number is
#: refused by our edge before the SDK sees it: ``upstream/wire_values.py``)
BAD = [
    ("1.0 envelope", "/", _rpc("GetTask", {"id": MARK}, jsonrpc=MARK), V1),
    ("1.0 method", "/", _rpc(MARK, {}), V1),
    ("1.0 params", "/", _rpc("GetTask", {"id": "t", "historyLength": [MARK]}), V1),
    ("0.3 params", "/", _rpc("tasks/get", {"id": "t", "historyLength": [MARK]}), {}),
    ("REST unknown task", f"/tasks/{MARK}", None, V1),
]
ROUNDS = 3


def _send_all(base: str) -> None:
    with httpx.Client(timeout=10, verify=TLS) as client:
        for _ in range(ROUNDS):
            for _what, path, body, headers in BAD:
                if body is None:
                    answer = client.get(base + path, headers=headers)
                else:
                    answer = client.post(base + path, json=body, headers=headers)
                assert answer.status_code in (200, 404), answer.text


def _sdk_records(caplog: pytest.LogCaptureFixture) -> Counter[tuple[str, str]]:
    return Counter((r.name, r.levelname) for r in caplog.records if r.name in SDK_LOGGERS)


def test_the_sdk_logs_each_client_error_at_warning_or_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    plain, _grpc_port = plain_agent(compat=True)
    with caplog.at_level(logging.INFO), threaded_server(plain) as plain_url:
        _send_all(plain_url)
        counted = _sdk_records(caplog)
        echoed = [r for r in caplog.records if MARK in r.getMessage() or r.exc_info]
    # 1.0: one WARNING each, and an ERROR with a traceback for params that do not parse;
    # 0.3: an ERROR with a traceback; REST: a WARNING for the unknown task
    assert counted == {
        ("a2a.server.routes.jsonrpc_dispatcher", "WARNING"): 3 * ROUNDS,
        ("a2a.server.routes.jsonrpc_dispatcher", "ERROR"): ROUNDS,
        ("a2a.compat.v0_3.jsonrpc_adapter", "ERROR"): ROUNDS,
        ("a2a.utils.error_handlers", "WARNING"): ROUNDS,
    }
    assert echoed


def test_our_client_errors_are_debug_records_and_the_plain_agent_keeps_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = [list(logging.getLogger(name).filters) for name in SDK_LOGGERS]
    plain, _grpc_port = plain_agent(compat=True)
    with threaded_server(plain) as plain_url, serve_agent() as ours:
        with caplog.at_level(logging.INFO):
            _send_all(ours.url)
            assert _sdk_records(caplog) == {}
            _send_all(plain_url)  # beside ours, as the SDK logs alone
            assert sum(_sdk_records(caplog).values()) == 6 * ROUNDS
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="a2a"):
            _send_all(ours.url)
        debug = _sdk_records(caplog)
    # Our agent stopped: the SDK's loggers are as they were (another test's agent that
    # was never stopped may still hold the filter on).
    assert [logging.getLogger(name).filters for name in SDK_LOGGERS] == before
    # Kept for whoever enables the SDK's loggers at DEBUG.
    assert set(debug) == {
        ("a2a.server.routes.jsonrpc_dispatcher", "DEBUG"),
        ("a2a.compat.v0_3.jsonrpc_adapter", "DEBUG"),
        ("a2a.utils.error_handlers", "DEBUG"),
    }


def test_the_sdk_renders_our_own_errors_as_internal_in_its_records() -> None:
    """Why the filter also takes the SDK's records of our own errors: it renders an error
    class it does not know as -32603 (logged at ERROR on a streamed call), keeping our
    marker in the data. When it stops, those records need no filtering."""
    from a2a.server.request_handlers.response_helpers import build_error_response

    from apcore_a2a.errors import WIRE_KEY, TaskUnreadableError

    error = build_error_response(1, TaskUnreadableError.of("t"))["error"]
    assert error["code"] == -32603
    assert f"'{WIRE_KEY}': 'TASK_UNREADABLE'" in str(error["data"])


def test_our_requests_sdk_records_quote_a_client_value_short(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 5000-character value a client sent: the SDK's records of our requests (the body
    it logs at DEBUG, its record of the client's error) quote it to 1,000 characters and
    its length; before, each record held it whole (5,069 to 5,282 characters)."""
    big = "x" * 5000
    bodies = (_rpc("GetTask", {"id": "t", "historyLength": big}), _rpc(big, {}))
    with (
        serve_agent() as ours,
        httpx.Client(timeout=10, verify=TLS) as client,
        caplog.at_level(logging.DEBUG, logger="a2a"),
    ):
        for body in bodies:
            assert client.post(ours.url + "/", json=body, headers=V1).status_code == 200
    quoted = [r.getMessage() for r in caplog.records if r.name in SDK_LOGGERS]
    assert any("characters)" in text for text in quoted), quoted
    assert all(len(text) <= 1100 for text in quoted), [len(text) for text in quoted]


async def test_the_sdk_logs_a_module_failure_it_answers_at_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Why the filter also takes the SDK's records of an error carrying an ``apcoreCode``
    (a module's failure, which the agent logs itself with its traceback): the SDK logs the
    500 it answers on REST at ERROR, quoting the code. When it stops, one crash has one
    ERROR record without the filter."""
    from a2a.utils.error_handlers import rest_error_handler
    from a2a.utils.errors import InternalError

    @rest_error_handler
    async def failing() -> Any:
        raise InternalError(message="Module execution failed", data={"apcoreCode": "X"})

    with caplog.at_level(logging.INFO):
        answer = await failing()
    assert answer.status_code == 500
    assert [
        (r.name, r.levelno) for r in caplog.records if "'apcoreCode': 'X'" in r.getMessage()
    ] == [("a2a.utils.error_handlers", logging.ERROR)]
