"""One test per row of the error table, through HTTP (see README "Errors").

A row answered as the request's error is answered so while no task exists: a message
reply's module raises it (``errors.raise`` of :func:`reply_url`). A task skill's module
raising it after its task exists ends that task ``failed`` with the same words.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from apcore import Executor, ModuleError, Registry
from apcore.middleware import CircuitBreakerMiddleware

from apcore_a2a import A2AServerFactory
from apcore_a2a.adapters.errors import ERROR_TABLE
from tests._support import TLS, free_port, running_server
from tests.foundation.conftest import serve_in_thread
from tests.foundation.modules import RaiseIn, RaiseOut, Raiser

RAISED = {
    "MODULE_NOT_FOUND": (-32601, "Skill not found: errors.raise"),
    "MODULE_DISABLED": (-32601, "Skill is disabled: errors.raise"),
    "SCHEMA_VALIDATION_ERROR": (-32602, "Input validation failed"),
    "GENERAL_INVALID_INPUT": (-32602, "bad input"),
    # the ACL's refusal of the skill itself, as the check before the run answers it
    "ACL_DENIED": (-32601, "Skill not found: errors.raise"),
}
FINAL = {
    "APPROVAL_DENIED": ("rejected", "Approval denied: not today"),
    "APPROVAL_TIMEOUT": ("failed", "Approval timed out"),
    "MODULE_TIMEOUT": ("failed", "Execution timed out"),
    "EXECUTION_CANCELLED": ("canceled", "Canceled"),
    "MODULE_EXECUTE_ERROR": ("failed", "Module execution failed"),
    "CALL_DEPTH_EXCEEDED": ("failed", "Call depth exceeded"),
    "CIRCULAR_CALL": ("failed", "Circular call detected"),
    "CALL_FREQUENCY_EXCEEDED": ("failed", "Call frequency exceeded"),
    "CIRCUIT_BREAKER_OPEN": ("failed", "Temporarily unavailable; retry later"),
    "CIRCUIT_OPEN": ("failed", "Temporarily unavailable; retry later"),
    "TASK_LIMIT_EXCEEDED": ("failed", "Too many tasks; retry later"),
    "GENERAL_INTERNAL_ERROR": ("failed", "Internal error"),
    "CUSTOM_QUOTA": ("failed", "quota exhausted"),
    "NESTED_NOT_FOUND": ("failed", "A call this skill makes names no module the agent serves"),
    "NESTED_DENIED": ("failed", "Permission denied: a call this skill makes was refused"),
    "UNNAMED_DENIED": ("failed", "Permission denied: a call this skill makes was refused"),
}


class ReplyRaiser(Raiser):
    metadata = {"a2a": {"reply": "message"}}


@pytest.fixture(scope="module")
def reply_url() -> Iterator[str]:
    """An agent whose ``errors.raise`` answers with a message: no task is made for it."""
    registry = Registry()
    registry.register("errors.raise", ReplyRaiser())
    with serve_in_thread(registry) as url:
        yield url


def test_every_table_row_is_tested() -> None:
    tested = set(RAISED) | set(FINAL)
    assert set(ERROR_TABLE) <= tested


def call(url: str, kind: str) -> dict:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": kind,
                "role": "user",
                "parts": [{"kind": "data", "data": {"kind": kind}}],
            },
            "metadata": {"skillId": "errors.raise"},
        },
    }
    response = httpx.post(url + "/", json=body, timeout=20, verify=TLS)
    assert response.status_code == 200
    text = response.text
    assert "Traceback" not in text and "/srv/app" not in text and "hunter2" not in text
    return response.json()


@pytest.mark.parametrize("kind", sorted(RAISED))
def test_caller_errors_answer_with_a2a_code(reply_url: str, kind: str) -> None:
    code, message = RAISED[kind]
    payload = call(reply_url, kind)
    assert payload["error"]["code"] == code
    assert payload["error"]["message"].startswith(message)


@pytest.mark.parametrize("kind", sorted(set(RAISED) - {"ACL_DENIED"}))
def test_caller_errors_after_the_task_exists_fail_it(agent_url: str, kind: str) -> None:
    """The ACL's refusal of the skill ends a task made by then ``rejected``, the blocking
    send answered it (``tests/lifecycle/test_run_acl.py``)."""
    message = RAISED[kind][1]
    task = call(agent_url, kind)["result"]
    assert task["status"]["state"] == "failed"
    text_part, data_part = task["status"]["message"]["parts"]
    assert text_part["text"].startswith(message)
    assert data_part["data"]["code"] == kind
    assert data_part["data"]["message"] == text_part["text"]


@pytest.mark.parametrize("kind", sorted(FINAL))
def test_execution_errors_end_the_task(agent_url: str, kind: str) -> None:
    state, message = FINAL[kind]
    task = call(agent_url, kind)["result"]
    assert task["status"]["state"] == state
    text_part, data_part = task["status"]["message"]["parts"]
    assert text_part["text"] == message
    data = data_part["data"]
    renamed = {
        "CUSTOM_QUOTA": "BILLING_QUOTA",
        "NESTED_NOT_FOUND": "MODULE_NOT_FOUND",
        "NESTED_DENIED": "ACL_DENIED",
        "UNNAMED_DENIED": "ACL_DENIED",
    }
    expected_code = renamed.get(kind, kind)
    assert data["code"] == expected_code
    assert data["message"] == message
    assert data["type"]
    assert len(json.dumps(data)) < 1000


class Flaky:
    """Fails every call; counts how often it really ran."""

    input_schema = RaiseIn
    output_schema = RaiseOut
    description = "Always fails"

    def __init__(self) -> None:
        self.runs = 0

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        self.runs += 1
        raise ModuleError(code="FLAKY_DOWN", message="backend down")


async def test_apcore_circuit_breaker_opens_and_the_task_says_retry_later() -> None:
    """apcore's own CircuitBreakerMiddleware, driven for real: after two failures in a
    window of two the circuit opens, and the next call fails without running the module."""
    flaky = Flaky()
    registry = Registry()
    registry.register("flaky.call", flaky)
    executor = Executor(registry)
    executor.use(
        CircuitBreakerMiddleware(
            open_threshold=0.5, window_size=2, min_samples=2, recovery_window_ms=600_000
        )
    )
    port = free_port()
    app, _card = A2AServerFactory(executor, environ={}, port=port).create()
    async with running_server(app, port=port) as url:

        def send() -> dict[str, Any]:
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": uuid.uuid4().hex,
                        "role": "ROLE_USER",
                        "parts": [{"data": {"kind": "x"}}],
                        "metadata": {"skillId": "flaky.call"},
                    }
                },
            }
            response = httpx.post(
                url + "/", json=body, headers={"A2A-Version": "1.0"}, timeout=20, verify=TLS
            )
            assert response.status_code == 200, response.text
            task: dict[str, Any] = response.json()["result"]["task"]
            return task

        codes = []
        for _ in range(3):
            task = await asyncio.to_thread(send)
            assert task["status"]["state"] == "TASK_STATE_FAILED"
            codes.append(task["status"]["message"]["parts"][1]["data"]["code"])
        assert codes == ["FLAKY_DOWN", "FLAKY_DOWN", "CIRCUIT_BREAKER_OPEN"]
        assert task["status"]["message"]["parts"][0]["text"] == FINAL["CIRCUIT_BREAKER_OPEN"][1]
        assert flaky.runs == 2  # the open circuit kept the third call from the module
