"""Every scenario, unchanged, over JSON-RPC, REST and gRPC at protocol 1.0 and 0.3.

For each scenario the six results (official a2a-sdk client, one transport each) are
normalized (ids -> placeholders, timestamps dropped) and compared field by field:

* within one protocol version, every binding must give exactly what JSON-RPC gives;
* across versions, 0.3 must give what 1.0 gives except where the 0.3 protocol itself
  differs (:data:`VERSION_DIFFERENCES`).

A few gaps of the a2a-sdk 1.3 *client* on one transport are listed in :data:`SDK_GAPS`.
Both tables are checked for staleness: a listed difference that disappears fails the test,
so the tables only ever describe differences that really exist.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tests.bindings._agent import Agent
from tests.bindings._normalize import differences
from tests.bindings._peers import (
    EXPECTED_TRANSPORT,
    TRANSPORTS,
    fetch_card,
    label,
    open_peer,
    transport_of,
)
from tests.bindings._scenarios import SCENARIOS

SCENARIO_TIMEOUT = 20.0

#: Paths (prefixes) where protocol 0.3 legitimately answers differently from 1.0.
VERSION_DIFFERENCES: dict[str, list[str]] = {
    # 0.3's historyLength has no presence: 0 reads as "not given" and returns all history.
    "get": ["without_history.history"],
    # ListTasks does not exist in protocol 0.3; the SDK's 0.3 clients refuse it locally.
    "list": [""],
}

#: (scenario, binding, version) -> paths where the a2a-sdk 1.3 client on that transport
#: cannot express what the server did, or the binding does not offer it.
SDK_GAPS: dict[tuple[str, str, str], list[str]] = {
    # CompatRestTransport raises NotImplementedError for list/delete push configs.
    ("push_config_crud", "HTTP+JSON", "0.3"): ["listed", "deleted", "after_delete"],
    # gRPC streams carry no event ids (standard wire only): no id-based resume there.
    ("resume_stream", "GRPC", "1.0"): ["rest", "ids_rise"],
    ("resume_stream", "GRPC", "0.3"): ["rest", "ids_rise"],
}


def _covered(path: str, prefixes: list[str]) -> bool:
    return any(p == "" or path == p or path.startswith((p + ".", p + "[")) for p in prefixes)


def _split(diffs: list[str], prefixes: list[str]) -> tuple[list[str], list[str]]:
    """(unexpected differences, expected ones) for *prefixes*."""
    unexpected = [d for d in diffs if not _covered(d.split(": ", 1)[0], prefixes)]
    expected = [d for d in diffs if _covered(d.split(": ", 1)[0], prefixes)]
    return unexpected, expected


async def _run_everywhere(agent: Agent, name: str) -> dict[str, Any]:
    card = await fetch_card(agent.url)
    results: dict[str, Any] = {}
    for binding, version in TRANSPORTS:
        async with open_peer(card, binding, version) as peer:
            results[peer.name] = await asyncio.wait_for(
                SCENARIOS[name](peer), timeout=SCENARIO_TIMEOUT
            )
    return results


# -- what the baseline itself must say (so "all bindings equally wrong" cannot pass) --------
def _state(task: dict[str, Any]) -> str:
    return str(task["status"]["state"])


def _artifact_data(task: dict[str, Any]) -> Any:
    return task["artifacts"][0]["parts"][0]["data"]


def _expect_send_text(r: dict[str, Any]) -> None:
    task = r[label("JSONRPC", "1.0")]
    assert _state(task) == "TASK_STATE_COMPLETED"
    assert _artifact_data(task) == {"text": "echo: hello"}
    assert task["history"][0]["parts"] == [{"text": "hello"}]


def _expect_send_data(r: dict[str, Any]) -> None:
    task = r[label("JSONRPC", "1.0")]
    assert _state(task) == "TASK_STATE_COMPLETED"
    assert _artifact_data(task) == {"sum": 42}


def _expect_stream(r: dict[str, Any]) -> None:
    events = r[label("JSONRPC", "1.0")]
    kinds = [next(iter(e)) for e in events]
    assert kinds[0] == "task"
    assert events[1]["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"
    chunks = [
        e["artifactUpdate"]["artifact"]["parts"][0]["data"]["remaining"]
        for e in events
        if "artifactUpdate" in e and e["artifactUpdate"]["artifact"].get("parts")
    ]
    assert chunks == [3, 2, 1, 0]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def _expect_get(r: dict[str, Any]) -> None:
    got = r[label("JSONRPC", "1.0")]
    assert _state(got["full"]) == "TASK_STATE_COMPLETED"
    assert len(got["full"]["history"]) == 1
    assert "history" not in got["without_history"]


def _expect_list(r: dict[str, Any]) -> None:
    listed = r[label("JSONRPC", "1.0")]
    assert listed["totalSize"] == 1
    assert [_state(t) for t in listed["tasks"]] == ["TASK_STATE_COMPLETED"]
    for binding in ("JSONRPC", "HTTP+JSON", "GRPC"):
        assert r[label(binding, "0.3")]["error"] == "NotImplementedError"


def _expect_subscribe(r: dict[str, Any]) -> None:
    got = r[label("JSONRPC", "1.0")]
    assert _state(got["submitted"]) == "TASK_STATE_SUBMITTED"
    events = got["events"]
    assert _state(events[0]["task"]) == "TASK_STATE_WORKING"
    assert events[-2]["artifactUpdate"]["artifact"]["parts"][0]["data"] == {"released": True}
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def _expect_cancel(r: dict[str, Any]) -> None:
    got = r[label("JSONRPC", "1.0")]
    assert _state(got["canceled"]) == "TASK_STATE_CANCELED"
    assert _state(got["fetched"]) == "TASK_STATE_CANCELED"
    assert got["cancel_again"]["error"] == "TaskNotCancelableError"


def _expect_cancel_completed(r: dict[str, Any]) -> None:
    assert r[label("JSONRPC", "1.0")]["error"] == "TaskNotCancelableError"


def _expect_push(r: dict[str, Any]) -> None:
    got = r[label("JSONRPC", "1.0")]
    assert got["created"]["url"] == "http://127.0.0.1:9/hook"
    assert got["got"] == got["created"]
    assert got["listed"]["configs"] == [got["created"]]
    assert got["deleted"] is None
    assert got["after_delete"] == {}


def _expect_unknown_task(r: dict[str, Any]) -> None:
    got = r[label("JSONRPC", "1.0")]
    assert got["get"]["error"] == "TaskNotFoundError"
    assert got["cancel"]["error"] == "TaskNotFoundError"
    assert [e["error"] for e in got["subscribe"]] == ["TaskNotFoundError"]


def _expect_bad_params(r: dict[str, Any]) -> None:
    got = r[label("JSONRPC", "1.0")]
    assert got["wrong_type"]["error"] == "InvalidParamsError"
    assert "/a" in got["wrong_type"]["message"]
    assert got["missing_field"]["error"] == "InvalidParamsError"
    assert "/b" in got["missing_field"]["message"]
    assert got["unknown_skill"]["error"] == "MethodNotFoundError"
    assert "demo.nope" in got["unknown_skill"]["message"]


def _expect_resume(r: dict[str, Any]) -> None:
    got = r[label("JSONRPC", "1.0")]
    assert got["first"] == [("task", "submitted"), ("status", "working"), ("chunk", 5)]
    assert got["rest"] == [("chunk", n) for n in (4, 3, 2, 1, 0)] + [("status", "completed")]
    assert got["ids_rise"] is True


def _expect_route_by_schema(r: dict[str, Any]) -> None:
    got = r[label("JSONRPC", "1.0")]
    assert _state(got["routed"]) == "TASK_STATE_COMPLETED"
    assert _artifact_data(got["routed"]) == {"sum": 42}
    assert got["ambiguous"]["error"] == "InvalidParamsError"
    assert "skillId" in got["ambiguous"]["message"]


EXPECTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "send_text": _expect_send_text,
    "send_data": _expect_send_data,
    "stream": _expect_stream,
    "get": _expect_get,
    "list": _expect_list,
    "subscribe": _expect_subscribe,
    "cancel": _expect_cancel,
    "cancel_completed": _expect_cancel_completed,
    "push_config_crud": _expect_push,
    "unknown_task": _expect_unknown_task,
    "bad_params": _expect_bad_params,
    "resume_stream": _expect_resume,
    "route_by_schema": _expect_route_by_schema,
}


def test_every_scenario_has_expectations() -> None:
    assert set(EXPECTATIONS) == set(SCENARIOS)


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_scenario_is_the_same_on_every_binding(hosted_agent: Agent, name: str) -> None:
    results = await _run_everywhere(hosted_agent, name)
    EXPECTATIONS[name](results)

    problems: list[str] = []
    for version in ("1.0", "0.3"):
        reference = results[label("JSONRPC", version)]
        for binding in ("HTTP+JSON", "GRPC"):
            gaps = SDK_GAPS.get((name, binding, version), [])
            diffs = differences(reference, results[label(binding, version)])
            unexpected, expected = _split(diffs, gaps)
            problems += [f"{label(binding, version)} vs JSONRPC {version}: {d}" for d in unexpected]
            if gaps and not expected:
                problems.append(f"SDK_GAPS entry for {name} {binding} {version} is stale")

    allowed = VERSION_DIFFERENCES.get(name, [])
    diffs = differences(results[label("JSONRPC", "1.0")], results[label("JSONRPC", "0.3")])
    unexpected, expected = _split(diffs, allowed)
    problems += [f"0.3 vs 1.0: {d}" for d in unexpected]
    if allowed and not expected:
        problems.append(f"VERSION_DIFFERENCES entry for {name} is stale")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("binding", "version"), TRANSPORTS)
async def test_peer_uses_the_sdk_transport_for_its_binding_and_version(
    agent: Agent, binding: str, version: str
) -> None:
    card = await fetch_card(agent.url)
    async with open_peer(card, binding, version) as peer:
        assert type(transport_of(peer.client)) is EXPECTED_TRANSPORT[(binding, version)]
        assert type(transport_of(peer.streaming)) is EXPECTED_TRANSPORT[(binding, version)]
