"""A delivery waiting for a slot is queued, not in flight: one caller's such deliveries never
make ``push_queue_bytes`` stop another caller's receiver.

Each ``(task, config)`` queue's worker takes its next event off the queue before it waits
for a delivery slot (``push_max_deliveries``, at most half for one caller). Counted as being
delivered, those bodies could not be given back: bob's configs of one event each (a parked
task, canceled), waiting behind his one stalled POST, held the budget with no queued bytes,
so the next event of alice, whose receiver keeps up, stopped her config ("... would exceed
... bytes"). Now a delivery that is not in an attempt (waiting for its slot, or pausing
between retries) is stopped like a queued one.
"""

from __future__ import annotations

import httpx

from tests._support import TLS

from ._agent import push_agent, rpc, skill_message, statuses
from ._hostile import hostile

KEYS = ("key-alice-0123456789=alice", "key-bob-0123456789ab=bob")
ALICE, BOB = ({"X-API-Key": key.split("=")[0]} for key in KEYS)


async def test_deliveries_waiting_for_a_slot_give_way_to_another_callers_receiver() -> None:
    budget = 8_000
    async with (
        hostile("stall") as stall,
        hostile("ok") as polite,
        push_agent(
            api_keys=KEYS,
            push_timeout=30.0,
            push_retry_delays=(),
            push_max_deliveries=2,  # one slot per caller
            push_queue_bytes=budget,
            shutdown_timeout=1.0,
        ) as (base, app),
        httpx.AsyncClient(timeout=10, headers=ALICE, verify=TLS) as alice,
        httpx.AsyncClient(timeout=10, headers=BOB, verify=TLS) as bob,
    ):
        sender = app.state.a2a.extras["push"].sender
        parked = []
        for _ in range(40):  # parked, with a config each: nothing is pushed yet
            reply = await rpc(
                bob, base, "SendMessage", {"message": skill_message("demo.transfer", 1)}
            )
            task_id = reply["result"]["task"]["id"]
            hook = {"taskId": task_id, "id": "s", "url": stall.url}
            assert "result" in await rpc(bob, base, "CreateTaskPushNotificationConfig", hook)
            parked.append(task_id)
        for task_id in parked:  # one event each: the cancel, waiting behind the stalled POST
            await rpc(bob, base, "CancelTask", {"id": task_id})
        await stall.wait_for(lambda: len(stall.conns) == 1)
        assert sender.held_bytes > budget // 2  # bob's bodies, one in flight, none queued
        hook = {"taskPushNotificationConfig": {"id": "p", "url": polite.url}}
        chunks = {"message": skill_message("demo.chunks", 10), "configuration": hook}
        hers = (await rpc(alice, base, "SendMessage", chunks))["result"]["task"]["id"]
        assert await statuses(alice, base, hers) == {"p": ("active", None)}
        await polite.wait_for(
            lambda: sum(b"TASK_STATE_COMPLETED" in c.request for c in polite.closed()) == 1
        )
        assert sum(b'"artifactUpdate"' in c.request for c in polite.conns) == 10
        his = [(await statuses(bob, base, task_id))["s"] for task_id in parked]
        reached = f"the events waiting for push receivers reached {budget} bytes"
        assert any(reason and reason.startswith(reached) for _state, reason in his), his
        assert sender.held_bytes <= budget
        stall.release()
        await sender.idle()
        assert sender.held_bytes == 0
