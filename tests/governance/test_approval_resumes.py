"""What an approval resumes: the input that asked for it, however often the task parks.

Before: an approval that led to another approval (a second approver's turn, a handler
still pending, a module whose nested call needs approval) recorded the approving
message as the input asked for, so the next ``{"approved": true}`` ran the module on
``{"approved": true}``: "Input validation failed", or the module on other arguments. And
a skill whose module calls an approval-gated module asked again after every approval,
naming the skill, not the module that needs it: it could never complete.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from a2a.types import TaskState
from apcore import ApprovalResult, Context, Executor, Registry
from apcore.decorator import module
from google.protobuf.json_format import MessageToDict

from apcore_a2a import A2AApprovalHandler, A2AServerFactory
from tests._sdk import make_client, request
from tests._support import free_port, running_server
from tests.lifecycle._client import BINDINGS, collect

from ._agent import V1, call, send, served


def _registry(ran: list[int]) -> Registry:
    registry = Registry()

    @module(
        id="bank.pay",
        description="Pay",
        annotations={"requires_approval": True},
        registry=registry,
    )
    def pay(amount: int) -> dict[str, int]:
        ran.append(amount)
        return {"paid": amount}

    @module(id="shop.buy", description="Buy", registry=registry)
    async def buy(amount: int, context: Context) -> dict[str, Any]:
        paid: dict[str, Any] = await context.executor.call_async(
            "bank.pay", {"amount": amount}, context
        )
        return paid

    @module(
        id="shop.order",
        description="Order",
        annotations={"requires_approval": True},
        registry=registry,
    )
    async def order(amount: int, context: Context) -> dict[str, Any]:
        return await buy(amount, context)

    return registry


class FourEyes(A2AApprovalHandler):
    """Two approvals per call: the first answer is the first approver's."""

    def __init__(self) -> None:
        super().__init__()
        self.checks = 0

    async def check_approval(self, approval_id: str) -> ApprovalResult:
        result = await super().check_approval(approval_id)
        self.checks += 1
        if self.checks % 2 and result.status == "approved":
            return ApprovalResult(status="pending", approval_id=f"second-{approval_id}")
        return result


async def _approve(http: Any, task_id: str) -> dict[str, Any]:
    answer = await http.post("/", json=send(None, {"approved": True}, taskId=task_id), headers=V1)
    task: dict[str, Any] = answer.json()["result"]["task"]
    return task


def _said(task: dict[str, Any]) -> tuple[str, Any]:
    return task["status"]["state"], task["status"]["message"]["parts"][1]["data"]


async def test_a_second_approval_resumes_the_input_that_asked_first() -> None:
    ran: list[int] = []
    executor = Executor(_registry(ran), approval_handler=FourEyes())
    async with served(executor) as http:
        parked = (await call(http, "bank.pay", {"amount": 5}))["result"]["task"]
        state, data = _said(await _approve(http, parked["id"]))
        assert (state, data["code"]) == ("TASK_STATE_INPUT_REQUIRED", "APPROVAL_PENDING")
        assert ran == []
        done = await _approve(http, parked["id"])
        assert done["status"]["state"] == "TASK_STATE_COMPLETED", json.dumps(done["status"])
        assert ran == [5]


async def test_an_approval_of_a_module_the_skill_calls_runs_it_once() -> None:
    ran: list[int] = []
    executor = Executor(_registry(ran), approval_handler=A2AApprovalHandler())
    async with served(executor) as http:
        parked = (await call(http, "shop.buy", {"amount": 3}))["result"]["task"]
        state, data = _said(parked)
        assert (state, data["moduleId"]) == ("TASK_STATE_INPUT_REQUIRED", "bank.pay")
        assert (
            "Approval required to run bank.pay" in parked["status"]["message"]["parts"][0]["text"]
        )
        done = await _approve(http, parked["id"])
        assert done["status"]["state"] == "TASK_STATE_COMPLETED", json.dumps(done["status"])
        assert done["artifacts"][0]["parts"][0]["data"] == {"paid": 3}
        assert ran == [3]
        # The approval was this task's: another task's nested call asks again.
        again = (await call(http, "shop.buy", {"amount": 4}))["result"]["task"]
        assert _said(again)[0] == "TASK_STATE_INPUT_REQUIRED"
        assert ran == [3]


async def test_a_gated_skill_calling_a_gated_module_asks_for_each_once() -> None:
    ran: list[int] = []
    executor = Executor(_registry(ran), approval_handler=A2AApprovalHandler())
    async with served(executor) as http:
        parked = (await call(http, "shop.order", {"amount": 6}))["result"]["task"]
        assert _said(parked)[1]["moduleId"] == "shop.order"
        inner = await _approve(http, parked["id"])
        assert _said(inner) == ("TASK_STATE_INPUT_REQUIRED", _said(inner)[1])
        assert _said(inner)[1]["moduleId"] == "bank.pay"
        done = await _approve(http, parked["id"])
        assert done["status"]["state"] == "TASK_STATE_COMPLETED", json.dumps(done["status"])
        assert ran == [6]


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_a_nested_approval_on_every_binding(binding: str, version: str) -> None:
    ran: list[int] = []
    executor = Executor(_registry(ran), approval_handler=A2AApprovalHandler())
    port = free_port()
    app, _card = A2AServerFactory(
        executor, environ={}, name="nested", port=port, grpc_port=free_port()
    ).create()
    async with running_server(app, port=port) as url:
        client = await make_client(url, binding, version)
        try:
            events = await collect(client.send_message(request("shop.buy", {"amount": 2})))
            parked = events[-1].task
            assert parked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert MessageToDict(parked.metadata)["apcore"]["approval"]["moduleId"] == "bank.pay"
            answer = request(None, {"approved": True}, task_id=parked.id)
            done = (await collect(client.send_message(answer)))[-1].task
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
        finally:
            await client.close()
    assert ran == [2]


async def test_a_skill_calling_two_gated_modules_ends_once_the_first_ran() -> None:
    # A resumed run re-runs the skill from its input: approving bank.pay ran it, then
    # bank.ship asked; approving that ran the skill again, whose bank.pay asked again (its
    # approval used), and so on for ever, paying at each approval of bank.pay.
    ran: list[str] = []
    registry = Registry()
    for name in ("bank.pay", "bank.ship"):

        def made(name: str = name) -> Any:
            def gated(amount: int) -> dict[str, int]:
                ran.append(name)
                return {"amount": amount}

            return gated

        gate = {"requires_approval": True}
        module(id=name, description=name, annotations=gate, registry=registry)(made())

    @module(id="shop.deliver", description="Deliver", registry=registry)
    async def deliver(amount: int, context: Context) -> dict[str, Any]:
        for name in ("bank.pay", "bank.ship"):
            await context.executor.call_async(name, {"amount": amount}, context)
        return {"delivered": amount}

    executor = Executor(registry, approval_handler=A2AApprovalHandler())
    async with served(executor) as http:
        parked = (await call(http, "shop.deliver", {"amount": 7}))["result"]["task"]
        assert _said(parked)[1]["moduleId"] == "bank.pay"
        ended = await _approve(http, parked["id"])
        assert _said(ended) == (
            "TASK_STATE_FAILED",
            {
                "code": "APPROVAL_NOT_RESUMABLE",
                "message": "shop.deliver calls bank.pay and then bank.ship, each requiring "
                "approval: it cannot be resumed past bank.ship, as that would run bank.pay "
                "again",
                "type": "ApprovalPending",
            },
        )
        again = await http.post(
            "/", json=send(None, {"approved": True}, taskId=parked["id"]), headers=V1
        )
        assert again.json()["error"]["code"] == -32004  # terminal: nothing more runs
    assert ran == ["bank.pay"]
