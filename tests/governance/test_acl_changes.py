"""An ACL given to a served executor, or a gate step put in or taken out of its strategy,
after the agent started, decides the next call (the executor's gates are looked up again
when the strategy's steps change; issue 43 keeps that lookup off each call)."""

from __future__ import annotations

import asyncio

from apcore import ACL, ACLRule, Executor
from apcore.builtin_steps import BuiltinACLCheck

from tests.governance._agent import apcore_client, call, served

DENY = [ACLRule(callers=["*"], targets=["*"], effect="deny")]


def _state(answer: dict[str, object]) -> object:
    result = answer.get("result")
    if isinstance(result, dict):
        return result["task"]["status"]["state"]  # type: ignore[index]
    return answer["error"]["code"]  # type: ignore[index]


def test_acl_changes_after_start_decide_the_next_call() -> None:
    executor: Executor = apcore_client().executor
    strategy = executor.current_strategy

    async def states() -> list[object]:
        seen = []
        async with served(executor) as http:
            seen.append(_state(await call(http, "demo.echo", {"text": "a"})))
            strategy.replace("acl_check", BuiltinACLCheck(acl=ACL(DENY, default_effect="deny")))
            seen.append(_state(await call(http, "demo.echo", {"text": "b"})))
            strategy.replace("acl_check", BuiltinACLCheck())
            seen.append(_state(await call(http, "demo.echo", {"text": "c"})))
            executor.set_acl(ACL(DENY, default_effect="deny"))  # the same step, another ACL
            seen.append(_state(await call(http, "demo.echo", {"text": "d"})))
        return seen

    done = "TASK_STATE_COMPLETED"
    assert asyncio.run(states()) == [done, -32601, done, -32601]
