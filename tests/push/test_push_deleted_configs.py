"""A push config deleted while its receiver stalls gives back what its deliveries held.

The sender had taken the config's events (queued, and one POST in flight to a receiver that
never answers); deleting the config left them to run their course: the queued events were
still posted in turn, with the deleted config's token and credentials, to the webhook its
owner had just removed, and the budget of all receivers (``push_queue_bytes``) kept their
bytes until then, the stalled POST's through all its attempts (``push_timeout`` each).
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests._support import TLS

from ._agent import V1, push_agent, rpc, skill_message
from ._hostile import hostile


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
async def test_deleting_a_config_frees_its_bytes_and_posts_nothing_more(binding: str) -> None:
    async with (
        hostile("stall") as stall,
        push_agent(push_timeout=30.0, push_retry_delays=(), shutdown_timeout=1.0) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        sender = app.state.a2a.extras["push"].sender
        hook = {"taskPushNotificationConfig": {"id": "s", "url": stall.url}}
        send = {"message": skill_message("demo.chunks", 10), "configuration": hook}
        task_id = (await rpc(client, base, "SendMessage", send))["result"]["task"]["id"]
        await stall.wait_for(lambda: len(stall.conns) == 1)  # the first POST, in flight
        assert sender.held_bytes > 0
        assert sender.pending > 1  # the task's other events wait behind it
        if binding == "jsonrpc":
            deleted = {"taskId": task_id, "id": "s"}
            assert "result" in await rpc(client, base, "DeleteTaskPushNotificationConfig", deleted)
        else:
            url = f"{base}/tasks/{task_id}/pushNotificationConfigs/s"
            assert (await client.delete(url, headers=V1)).status_code == 200
        # Its deliveries end with it, the POST in flight too (was: held for push_timeout).
        await asyncio.wait_for(sender.idle(), timeout=10)
        assert sender.held_bytes == 0
        assert sender.pending == 0
        await stall.wait_for(lambda: len(stall.closed()) == 1)  # the agent hung up
        assert len(stall.conns) == 1  # and posted nothing more to the deleted webhook
