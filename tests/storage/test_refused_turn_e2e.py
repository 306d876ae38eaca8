"""A follow-up the ACL refuses as its run starts, its client gone by then, gives its task's
wait back (PostgreSQL, two agents in cluster mode, each on real uvicorn).

A's run asks the ACL for the message (its metadata says ``plan: free``, which only the
run's context carries: ``tests/lifecycle/test_run_acl.py``); the ACL answers once the
client's stream has ended on A, then refuses. Before: the run's refusal had no request left
to raise it, and the request had left before the refusal, so nothing gave the claim of the
wait back: A held it as a live run's for as long as it ran, and every later follow-up, on
B as on A, was refused busy (-32090). Now the run that refuses a follow-up gives its wait
back itself, its client there or gone: the next answer continues the task.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from apcore import ACLRule, Context, Executor, Registry
from apcore.acl import AccessDecision

from apcore_a2a import A2AServerFactory

from .._postgres import pg_schema_url
from .._support import TLS, free_port, running_server
from ..lifecycle.test_run_acl import PlanACL, _Module
from .test_killed_turn_claim_e2e import ENV, V1, _send
from .test_turn_takeover_e2e import approved_when_free

pytest.importorskip("asyncpg")


class _HeldACL(PlanACL):
    """:class:`PlanACL`, whose refusal of a ``plan: free`` message waits for :attr:`left`
    (and tells :attr:`asked` that it waits)."""

    def __init__(self, rules: list[ACLRule]) -> None:
        super().__init__(rules)
        self.asked, self.left = asyncio.Event(), asyncio.Event()

    async def async_check_access(
        self, caller_id: str | None, target_id: str, context: Context | None = None, **kw: Any
    ) -> AccessDecision:
        decision = await super().async_check_access(caller_id, target_id, context, **kw)
        if decision.access == "deny":
            self.asked.set()
            await self.left.wait()
        return decision


@contextlib.asynccontextmanager
async def _agent(url: str, ran: list[str], acl: PlanACL) -> AsyncIterator[str]:
    registry = Registry()
    registry.register("late.task", _Module(ran))
    port = free_port()
    environ = {**ENV, "A2A_METRICS": "true", "A2A_OPS_DETAILS_PUBLIC": "true"}
    app, _ = A2AServerFactory(
        Executor(registry, acl=acl),
        environ=environ,
        port=port,
        grpc_port=free_port(),
        task_store=url,
        cluster=True,
    ).create()
    async with running_server(app, port=port) as base:
        yield base


async def test_a_follow_up_refused_in_its_run_after_its_client_left_frees_the_task() -> None:
    ran: list[str] = []
    rules = [ACLRule(callers=["@external"], targets=["*"], effect="allow")]
    acl = _HeldACL(rules)
    with pg_schema_url(agents=2) as url:
        async with (
            _agent(url, ran, acl) as a,
            _agent(url, ran, PlanACL(rules)) as b,
            httpx.AsyncClient(timeout=60, verify=TLS) as http,
        ):
            asked = {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"data": {}}],
                "metadata": {"skillId": "late.task"},
            }
            parked = (await _send(http, b, asked))["result"]["task"]
            assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", parked
            free = {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "taskId": parked["id"],
                "parts": [{"text": "hi"}],
                "metadata": {"plan": "free"},
            }
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
            body["params"] = {"message": free}
            streamed = asyncio.ensure_future(http.post(a + "/", json=body, headers=V1))
            async with asyncio.timeout(30):  # a hang guard
                await acl.asked.wait()  # A's run has the message, and asks the ACL
            streamed.cancel()  # the client leaves
            with contextlib.suppress(asyncio.CancelledError):
                await streamed
            async with asyncio.timeout(30):  # a hang guard: A's stream ends
                while (await http.get(a + "/metrics")).json()["sse_active_streams"]:
                    await asyncio.sleep(0.05)
            acl.left.set()  # now the ACL refuses, the request gone
            # A is live: nothing changes by waiting
            answer = await approved_when_free(http, b, parked["id"], 10)
            assert "result" in answer, answer  # was: busy (-32090) while A ran
            state = answer["result"]["task"]["status"]["state"]
            assert state == "TASK_STATE_COMPLETED", answer
    assert ran == ["late.task", "late.task"], ran  # the refused message ran nothing
