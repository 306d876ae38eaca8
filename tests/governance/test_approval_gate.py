"""No module that requires approval runs unasked, whatever executor is served (issue 40
item 3). Before: ``serve(APCore().executor)`` ran ``requires_approval`` modules at once
(apcore skips a gate without a handler, with a warning)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from apcore import APCore, ExecutionPolicy, Executor
from apcore.decorator import module

from apcore_a2a import A2AServerFactory
from apcore_a2a.settings import SettingsError

from ._agent import V1, call, send, served

SAID = "The apcore Executor given has no approval handler"


def _paying_client(paid: list[int], **kwargs: Any) -> APCore:
    client = APCore(**kwargs)

    @module(
        id="bank.pay",
        description="Pay an amount",
        annotations={"requires_approval": True},
        registry=client.registry,
    )
    def pay(amount: int) -> dict[str, Any]:
        paid.append(amount)
        return {"paid": amount}

    return client


async def test_an_executor_without_a_handler_gets_ours_and_asks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    paid: list[int] = []
    executor = _paying_client(paid).executor
    assert not executor.governance_state().approval_handler_configured
    with caplog.at_level(logging.WARNING, logger="apcore_a2a"):
        async with served(executor) as http:
            parked = (await call(http, "bank.pay", {"amount": 5}))["result"]["task"]
            assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            assert paid == []
            approve = send(None, {"approved": True}, taskId=parked["id"])
            done = (await http.post("/", json=approve, headers=V1)).json()["result"]["task"]
            assert done["status"]["state"] == "TASK_STATE_COMPLETED"
            assert paid == [5]
        # Served again: it has a handler now, nothing more to say.
        A2AServerFactory(executor, environ={}).create()
    assert [r.getMessage() for r in caplog.records].count(
        SAID + ": apcore-a2a gives it an A2AApprovalHandler, so a module that requires "
        "approval asks the caller (input-required) instead of running unasked"
    ) == 1
    assert executor.governance_state().approval_handler_configured


async def test_a_strict_policy_without_a_handler_refuses_and_runs_nothing() -> None:
    paid: list[int] = []
    executor = _paying_client(paid, policy=ExecutionPolicy(strict=True)).executor
    async with served(executor) as http:
        task = (await call(http, "bank.pay", {"amount": 5}))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert paid == []
    assert not executor.governance_state().approval_handler_configured  # left as it was


def test_a_strategy_without_an_approval_gate_cannot_serve_such_a_module() -> None:
    paid: list[int] = []
    executor = Executor(_paying_client(paid).registry, strategy="internal")
    with pytest.raises(SettingsError) as refused:
        A2AServerFactory(executor, environ={}).create()
    assert str(refused.value) == (
        "bank.pay require approval, and the strategy of the apcore Executor given has no "
        "approval gate: serve them with apcore's approval_gate step (the standard strategy "
        "has it) so they never run unasked"
    )


async def test_such_a_module_registered_as_the_agent_runs_is_not_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The start refuses such a module; one registered later was published and ran unasked.
    paid: list[int] = []
    registry = _paying_client(paid).registry
    registry.unregister("bank.pay")

    @module(id="demo.echo", description="Echo", registry=registry)
    def echo(text: str) -> str:
        return text

    executor = Executor(registry, strategy="internal")
    async with served(executor) as http:
        registry.register("bank.pay", _paying_client(paid).registry.get("bank.pay"))
        card = (await http.get("/.well-known/agent-card.json", headers=V1)).json()
        refused = await call(http, "bank.pay", {"amount": 5})
    assert [skill["id"] for skill in card["skills"]] == ["demo.echo"]
    assert (refused["error"]["code"], refused["error"]["message"]) == (
        -32601,
        "Skill not found: bank.pay",
    )
    assert paid == []
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert said == [
        "Module bank.pay is not published: it requires approval, and the strategy of the "
        "apcore Executor given has no gate"
    ]
