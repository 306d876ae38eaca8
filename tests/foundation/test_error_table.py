"""One test per row of the error table, through HTTP (see README "Errors")."""

from __future__ import annotations

import json

import httpx
import pytest

from apcore_a2a.adapters.errors import ERROR_TABLE

RAISED = {
    "MODULE_NOT_FOUND": (-32601, "Skill not found: errors.raise"),
    "MODULE_DISABLED": (-32601, "Skill is disabled: errors.raise"),
    "SCHEMA_VALIDATION_ERROR": (-32602, "Input validation failed"),
    "GENERAL_INVALID_INPUT": (-32602, "bad input"),
    "ACL_DENIED": (-32001, "Task not found"),
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
    "TASK_LIMIT_EXCEEDED": ("failed", "Too many tasks; retry later"),
    "GENERAL_INTERNAL_ERROR": ("failed", "Internal error"),
    "CUSTOM_QUOTA": ("failed", "quota exhausted"),
}


def test_every_table_row_is_tested() -> None:
    tested = set(RAISED) | set(FINAL) | {"CIRCUIT_OPEN"}
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
    response = httpx.post(url + "/", json=body, timeout=20)
    assert response.status_code == 200
    text = response.text
    assert "Traceback" not in text and "/srv/app" not in text and "hunter2" not in text
    return response.json()


@pytest.mark.parametrize("kind", sorted(RAISED))
def test_caller_errors_answer_with_a2a_code(agent_url: str, kind: str) -> None:
    code, message = RAISED[kind]
    payload = call(agent_url, kind)
    assert payload["error"]["code"] == code
    assert payload["error"]["message"].startswith(message)


@pytest.mark.parametrize("kind", sorted(FINAL))
def test_execution_errors_end_the_task(agent_url: str, kind: str) -> None:
    state, message = FINAL[kind]
    task = call(agent_url, kind)["result"]
    assert task["status"]["state"] == state
    text_part, data_part = task["status"]["message"]["parts"]
    assert text_part["text"] == message
    data = data_part["data"]
    expected_code = "BILLING_QUOTA" if kind == "CUSTOM_QUOTA" else kind
    assert data["code"] == expected_code
    assert data["message"] == message
    assert data["type"]
    assert len(json.dumps(data)) < 1000
