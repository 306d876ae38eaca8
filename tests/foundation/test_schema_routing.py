"""Routing step 6: a message that names no skill goes to the one skill whose schema takes it.

Against the examples agent (``math.add``, ``text.stats``, ``text.countdown``,
``jobs.sleep``, ``bank.transfer``), as an LLM orchestrator such as ADK's
``RemoteA2aAgent`` sends it: plain text or a data part, no ``skillId``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .._support import ROOT, TLS, cli_server

EXAMPLES = str(ROOT / "examples" / "extensions")
V10 = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def agents() -> Iterator[tuple[str, str]]:
    """The examples agent with schema routing (default) and with it turned off."""
    with (
        cli_server(["--extensions-dir", EXAMPLES]) as (on, _a),
        cli_server(["--extensions-dir", EXAMPLES], env={"A2A_ROUTE_BY_SCHEMA": "false"}) as (
            off,
            _b,
        ),
    ):
        yield on, off


async def _send(url: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
        response = await http.post(url + "/", json=body, headers=V10)
    payload: dict[str, Any] = response.json()
    return payload


@pytest.mark.parametrize(
    ("parts", "skill"),
    [
        ([{"data": {"a": 2, "b": 40}}], "math.add"),
        ([{"text": "three little words"}], "text.stats"),
        ([{"text": '{"a": 1, "b": 2}'}], "math.add"),
        ([{"data": {"to": "acct-1", "amount": 5}}], "bank.transfer"),
        ([{"data": {"seconds": 0}}], "jobs.sleep"),
    ],
)
async def test_the_one_skill_whose_schema_takes_the_message_runs_it(
    agents: tuple[str, str], parts: list[dict[str, Any]], skill: str
) -> None:
    answer = await _send(agents[0], parts)
    task = answer["result"]["task"]
    assert task["metadata"]["skillId"] == skill, answer
    assert task["status"]["state"] in {"TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED"}


async def test_the_routed_skill_computes_the_answer(agents: tuple[str, str]) -> None:
    answer = await _send(agents[0], [{"data": {"a": 2, "b": 40}}])
    (artifact,) = answer["result"]["task"]["artifacts"]
    assert artifact["parts"][0]["data"] == {"sum": 42}


@pytest.mark.parametrize(
    "parts",
    [
        [{"data": {"nothing": "matches"}}],  # no skill names that key
        [{"data": {"a": "two", "b": 40}}],  # the only skill naming a/b refuses the value
    ],
)
async def test_unmatched_messages_still_ask_for_a_skill_id(
    agents: tuple[str, str], parts: list[dict[str, Any]]
) -> None:
    error = (await _send(agents[0], parts))["error"]
    assert error["code"] == -32602
    assert error["message"] == "Missing required parameter: metadata.skillId"


async def test_a_message_several_skills_take_names_them_all(agents: tuple[str, str]) -> None:
    # text.countdown and jobs.sleep both take an empty object: the caller learns which.
    error = (await _send(agents[0], [{"data": {}}]))["error"]
    assert error["code"] == -32602
    assert error["message"] == (
        "Missing required parameter: metadata.skillId"
        " (the message fits several skills: jobs.sleep, text.countdown)"
    )


def test_plain_text_to_the_quick_start_agent_names_both_text_skills() -> None:
    # The README's quick-start agent adds greet.hello (one string) beside text.stats.
    args = ["--extensions-dir", EXAMPLES, "--bindings", str(ROOT / "examples" / "bindings")]
    with cli_server(args) as (base, _proc):
        message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello there"}]}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        error = httpx.post(base + "/", json=body, headers=V10, timeout=60, verify=TLS).json()[
            "error"
        ]
    assert "fits several skills: greet.hello, text.stats" in error["message"], error


async def test_the_setting_turns_the_step_off(agents: tuple[str, str]) -> None:
    error = (await _send(agents[1], [{"data": {"a": 2, "b": 40}}]))["error"]
    assert error["code"] == -32602
