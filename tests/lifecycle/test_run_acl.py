"""The ACL's refusal of a skill that comes when it runs is answered as the check before it.

The request context builder asks the ACL before any task exists, with the caller's identity
alone. An ACL that reads more of the call (here the message's metadata, which apcore hands
it in the run's context) or one changed since can refuse the skill when it runs. That was
answered -32001 "Task not found", for a new message too, and a task skill's task was left
``failed`` with "Task not found" as its reason. Now the run asks the ACL as apcore's gate
will ask it, before it emits anything, and the caller gets what the check before gives: a
new message "Skill not found" (as for a skill the ACL hides), a follow-up "Task not found"
with its task unchanged, still waiting for its answer. No task is made, no module runs.
An ACL that changes between the run's question and apcore's own still gets the same answer;
a task skill's task, made by then, ends ``rejected`` with it as its reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.types import GetTaskRequest, SendMessageRequest, TaskState
from apcore import ACL, ACLRule, Context, Executor, Registry
from apcore.acl import AccessDecision

from apcore_a2a import A2AServerFactory, InputRequired
from tests._sdk import make_client, request

from .._support import TLS, free_port, running_server
from ._client import BINDINGS, V1, collect, rpc, wire_message
from ._modules import MaybeText as In
from ._modules import SaidOut as Out

#: what the SDK's 0.3 REST client says of any HTTP 404 (it reads no body)
NOT_FOUND_03 = "MethodNotFoundError: Resource not found"


class _Module:
    input_schema = In
    output_schema = Out
    description = "Answer"

    def __init__(self, ran: list[str], reply: str = "task") -> None:
        self.ran = ran
        self.metadata = {"a2a": {"reply": reply}}

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        self.ran.append(context.data["a2a.skill_id"])
        if not inputs.get("text"):
            raise InputRequired("Say something", field="text")
        return {"said": inputs["text"]}


class PlanACL(ACL):
    """Refuses the ``late.*`` skills to a message whose metadata says ``plan: free``, which
    only the run's context carries; the ``race.*`` skills, when apcore asks the second
    time for one message (the ACL changed after the run's own question)."""

    def __init__(self, rules: list[ACLRule]) -> None:
        super().__init__(rules=rules)
        self.asked: dict[str, int] = {}

    async def async_check_access(
        self, caller_id: str | None, target_id: str, context: Context | None = None, **kw: Any
    ) -> AccessDecision:
        decision = await super().async_check_access(caller_id, target_id, context, **kw)
        data = context.data if context is not None else {}
        plan = (data.get("a2a.message_metadata") or {}).get("plan")
        if target_id.startswith("late.") and plan == "free":
            return dataclasses.replace(decision, access="deny", reason="free plan")
        message_id = str(data.get("a2a.message_id"))
        self.asked[message_id] = self.asked.get(message_id, 0) + 1
        if target_id.startswith("race.") and self.asked[message_id] == 2:
            return dataclasses.replace(decision, access="deny", reason="changed")
        return decision


class SyncPlanACL:
    """An application's own ACL with the synchronous accessor alone (apcore's gate asks it
    when there is no async one): refuses the ``late.*`` skills to ``plan: free``."""

    def check_access(
        self, caller_id: str | None, target_id: str, context: Context | None = None, **kw: Any
    ) -> AccessDecision:
        data = context.data if context is not None else {}
        plan = (data.get("a2a.message_metadata") or {}).get("plan")
        refused = target_id.startswith("late.") and plan == "free"
        return AccessDecision(access="deny" if refused else "allow")


@contextlib.asynccontextmanager
async def _agent(ran: list[str], acl: Any = None) -> AsyncIterator[str]:
    registry = Registry()
    for name in ("late", "race", "hidden"):
        registry.register(f"{name}.task", _Module(ran))
        registry.register(f"{name}.reply", _Module(ran, "message"))
    rules = [
        ACLRule(callers=["@external"], targets=["hidden.*"], effect="deny"),
        ACLRule(callers=["@external"], targets=["*"], effect="allow"),
    ]
    port = free_port()
    app, _ = A2AServerFactory(
        Executor(registry, acl=acl or PlanACL(rules)),
        environ={},
        port=port,
        grpc_port=free_port(),
    ).create()
    async with running_server(app, port=port) as url:
        yield url


def _free(req: SendMessageRequest) -> SendMessageRequest:
    req.message.metadata.update({"plan": "free"})
    return req


async def _answer(client: Any, req: SendMessageRequest) -> Any:
    """The last event the send streams, or its error as ``Class: message``."""
    try:
        return (await collect(client.send_message(req)))[-1]
    except Exception as failure:
        return f"{type(failure).__name__}: {failure}"


async def _listed(url: str) -> int:
    async with httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http:
        listed = (await http.post("/", json=rpc("ListTasks", {}), headers=V1)).json()
    return int(listed["result"].get("totalSize", 0))


@pytest.mark.parametrize("streaming", [False, True], ids=["send", "stream"])
@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_a_skill_the_acl_refuses_when_it_runs_is_answered_as_before_it(
    binding: str, version: str, streaming: bool
) -> None:
    ran: list[str] = []
    async with _agent(ran) as url:
        client = await make_client(url, binding, version, streaming=streaming)
        try:
            for kind in ("task", "reply"):
                hidden = await _answer(client, request(f"hidden.{kind}", {"text": "hi"}))
                late = await _answer(client, _free(request(f"late.{kind}", {"text": "hi"})))
                raced = await _answer(client, request(f"race.{kind}", {"text": "hi"}))
                if (binding, version) == ("HTTP+JSON", "0.3"):
                    assert hidden.startswith(NOT_FOUND_03), hidden
                    assert late.startswith(NOT_FOUND_03), late
                else:
                    assert hidden == f"MethodNotFoundError: Skill not found: hidden.{kind}"
                    assert late == hidden.replace("hidden.", "late."), late
                if kind == "reply":  # nothing was made: the same answer again
                    assert raced == late.replace("late.", "race."), raced
                    continue
                # The task the run made before apcore refused it ended with the refusal.
                if isinstance(raced, str):  # a blocking send: answered the refusal
                    assert raced == late.replace("late.", "race."), raced
                    assert await _listed(url) == 1
                else:
                    status = raced.status_update.status
                    assert status.state == TaskState.TASK_STATE_REJECTED, raced
                    assert status.message.parts[0].text == "Skill not found: race.task"
        finally:
            await client.close()
        assert ran == [], ran  # no refused module ran
        assert await _listed(url) == 1  # the raced task alone: none made for the others


@pytest.mark.parametrize("streaming", [False, True], ids=["send", "stream"])
@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_a_follow_up_the_acl_refuses_when_it_runs_leaves_its_task_waiting(
    binding: str, version: str, streaming: bool
) -> None:
    ran: list[str] = []
    async with _agent(ran) as url:
        client = await make_client(url, binding, version, streaming=streaming)
        try:
            asked = (await collect(client.send_message(request("late.task", {}))))[0].task
            ids = {"task_id": asked.id, "context_id": asked.context_id}
            free = _free(request("late.task", {"text": "hi"}, **ids))
            refused = await _answer(client, free)
            if (binding, version) == ("HTTP+JSON", "0.3"):
                assert refused.startswith(NOT_FOUND_03), refused
            else:
                assert refused == "TaskNotFoundError: Task not found", refused
            waiting = await client.get_task(GetTaskRequest(id=asked.id))
            assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            held = [m.message_id for m in waiting.history]
            assert free.message.message_id not in held, held
            # The wait was given back: the next answer is taken.
            done = await _answer(client, request("late.task", {"text": "hi"}, **ids))
        finally:
            await client.close()
        done_status = done.status_update.status if streaming else done.task.status
        assert done_status.state == TaskState.TASK_STATE_COMPLETED, done
        assert ran == ["late.task", "late.task"], ran


async def test_an_acl_with_only_the_synchronous_accessor_is_asked_as_apcore_asks_it() -> None:
    ran: list[str] = []
    async with _agent(ran, SyncPlanACL()) as url:
        client = await make_client(url, "JSONRPC", "1.0")
        try:
            refused = await _answer(client, _free(request("late.task", {"text": "hi"})))
            done = await _answer(client, request("late.task", {"text": "hi"}))
        finally:
            await client.close()
    assert refused == "MethodNotFoundError: Skill not found: late.task", refused
    assert done.task.status.state == TaskState.TASK_STATE_COMPLETED, done
    assert ran == ["late.task"], ran


async def test_a_skill_refused_as_it_runs_is_not_among_the_available_skills() -> None:
    """As for a skill the ACL hides before the run, the answer lists only the others."""
    async with _agent([]) as url, httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http:
        answers = []
        for skill, plan in (("hidden.task", {}), ("late.task", {"plan": "free"})):
            message = wire_message(skill, {"text": "hi"})
            message["metadata"].update(plan)
            sent = await http.post("/", json=rpc("SendMessage", {"message": message}), headers=V1)
            [info] = sent.json()["error"]["data"]
            answers.append(json.loads(info["metadata"]["availableSkills"]))
    hidden, late = answers
    assert "late.task" in hidden and "late.task" not in late, answers
    assert late == [skill for skill in hidden if skill != "late.task"], answers
