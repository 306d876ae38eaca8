"""A webhook name whose lookup fails at a delivery (a transient DNS error) is tried again
by the sender's retry policy, as a connection failure is. Before, the delivery was refused
at once ("URL refused at delivery"), the event lost. A resolver's answer that is no address is refused at once: no retry
makes it one."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import httpx
import pytest

from apcore_a2a._egress import Resolver
from apcore_a2a.push import PushUrlPolicy
from apcore_a2a.push.attempt import Delivery, GiveUp, try_once
from apcore_a2a.push.signing import SigningKey
from tests._support import TLS
from tests.test_egress_addresses import answers, failing, nothing

from ._agent import GATES, push_agent, receiver, rpc, skill_message
from ._dns import name_server

GATE = 3900


async def test_a_webhook_name_that_fails_to_resolve_once_is_retried() -> None:
    GATES[GATE] = asyncio.Event()
    async with receiver() as rec, name_server({"hook.test": ["127.0.0.1"]}) as names:
        hook = {"id": "h", "url": f"http://hook.test:{urlsplit(rec.base).port}/h"}
        fast = {"push_retry_delays": (0.3,) * 3, "push_dns_servers": [names.address]}
        async with (
            push_agent(**fast) as (base, app),
            httpx.AsyncClient(timeout=10, verify=TLS) as client,
        ):
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


@pytest.mark.parametrize(
    ("resolve", "outcome"),
    [
        (answers("not-an-ip"), "refused"),  # no retry can make it an address
        (answers(None), "refused"),
        (failing, "retried"),  # the resolver's own failure may pass
        (nothing, "retried"),  # no address now
    ],
)
async def test_a_resolvers_unusable_answer_is_refused_at_once_a_failure_retried(
    resolve: Resolver, outcome: str
) -> None:
    policy = PushUrlPolicy(allow_insecure=True, resolver=resolve)
    delivery = Delivery("t-1", "c-1", "http://hook.test:9/h", {}, b"{}", "http://agent")
    if outcome == "refused":
        with pytest.raises(GiveUp, match=r"^URL refused at delivery: host 'hook.test' resolved"):
            await try_once(delivery, policy, None, SigningKey.generate(), 2)
    else:
        problem = await try_once(delivery, policy, None, SigningKey.generate(), 2)
        assert problem is not None and problem.startswith("URL not resolved at delivery")
