"""A webhook name whose lookup fails at a delivery (a transient DNS error) is tried again
by the sender's retry policy, as a connection failure is. Before, the delivery was refused
at once ("URL refused at delivery"), the event lost."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import httpx

from ._agent import GATES, push_agent, receiver, rpc, skill_message
from ._dns import name_server

GATE = 3900


async def test_a_webhook_name_that_fails_to_resolve_once_is_retried() -> None:
    GATES[GATE] = asyncio.Event()
    async with receiver() as rec, name_server({"hook.test": ["127.0.0.1"]}) as names:
        hook = {"id": "h", "url": f"http://hook.test:{urlsplit(rec.base).port}/h"}
        fast = {"push_retry_delays": (0.3,) * 3, "push_dns_servers": [names.address]}
        async with push_agent(**fast) as (base, app), httpx.AsyncClient(timeout=10) as client:
            sender = app.state.a2a.extras["push"].sender
            configuration = {"returnImmediately": True, "taskPushNotificationConfig": hook}
            send = {"message": skill_message("demo.gate", GATE), "configuration": configuration}
            assert "result" in await rpc(client, base, "SendMessage", send)
            await rec.wait_for(lambda: rec.accepted("/h"))
            await asyncio.wait_for(sender.idle(), timeout=10)
            asked = names.asks("hook.test")
            del names.table["hook.test"]  # NXDOMAIN from now on
            GATES[GATE].set()
            await names.until(lambda: names.asks("hook.test") > asked, within=10)
            names.table["hook.test"] = ["127.0.0.1"]
            completed = lambda: any(b"COMPLETED" in d.body for d in rec.accepted("/h"))  # noqa: E731
            await rec.wait_for(completed, timeout=10)
