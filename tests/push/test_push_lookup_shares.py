"""Who a webhook lookup is charged to (``push/lookups.py``): the callers still waiting
for it. A caller whose request ended (its client hung up, over real HTTP) gets its lookup
slot back at once, even while another caller still waits for the same lookup; the lookup
itself ends when nobody waits for it."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest
from a2a.types import TaskPushNotificationConfig

from apcore_a2a.push import AresResolver, PushUrlPolicy
from tests.bindings._grpc import stubs

from .._support import TLS, free_port
from ._agent import Receiver, add_message, push_agent, receiver
from ._dns import NameServer, name_server
from .test_push_dns import ALICE, BOB, _agent_on, _sockets_to, first_answer, register

#: Seconds a test waits for what must follow at once (a guard against hanging, no more).
_GUARD = 20


@pytest.fixture(autouse=True)
def _patient_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """c-ares gives a name that never answers up after about 11 s (resolv.conf's default
    timeouts): long enough here, so only the caller's hang-up can end its lookup early."""
    monkeypatch.setenv("RES_OPTIONS", "timeout:60 attempts:5")


def _hook(rec: Receiver) -> str:
    """Alice's webhook on the receiver *rec*: her deliveries succeed at once."""
    return f"http://alice.hooks.test:{httpx.URL(rec.base).port}/hook"


async def _until_sockets(dns: NameServer, count: int) -> None:
    """Wait until *count* query sockets are open to *dns*: pycares closes an ended
    lookup's socket on a thread of its own, a moment after the lookup ends."""
    async with asyncio.timeout(_GUARD):
        while _sockets_to(dns) != count:
            await asyncio.sleep(0.02)


async def _hung_up(request: asyncio.Task[object]) -> None:
    """End *request* as its client hanging up: httpx closes the connection."""
    request.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await request


@pytest.mark.parametrize("how", ["SendMessage", "SendStreamingMessage", "create"])
async def test_a_caller_that_hangs_up_gets_its_lookup_slot_back_at_once(how: str) -> None:
    # Alice registers a webhook whose name never answers and hangs up: its lookup ends
    # then (its query's socket closes), not at push_timeout, and her next webhook is
    # looked up and accepted while the first would still have waited.
    async with (
        name_server({"alice.hooks.test": ["127.0.0.1"]}) as dns,
        receiver() as rec,
        _agent_on(dns, [ALICE], push_timeout=600.0) as (base, client),
    ):
        stuck = asyncio.create_task(register(client, base, ALICE, "https://a.blackhole.test/", how))
        await dns.until(lambda: dns.asks("a.blackhole.test") > 0, within=_GUARD)
        await _hung_up(stuck)
        async with asyncio.timeout(_GUARD):
            reply = await register(client, base, ALICE, _hook(rec), how)
        await _until_sockets(dns, 0)  # the hung-up lookup's query is no longer out
    assert "result" in reply, reply


async def test_a_caller_that_hangs_up_leaves_a_shared_lookup_to_the_one_still_waiting() -> None:
    # Alice starts the lookup of a name that never answers, Bob's request joins it, and
    # Alice hangs up: the lookup goes on for Bob (one lookup, still out), charged to him
    # alone, so Alice's next webhook is accepted while Bob still waits.
    async with (
        name_server({"alice.hooks.test": ["127.0.0.1"]}) as dns,
        receiver() as rec,
        _agent_on(dns, [ALICE, BOB], push_timeout=600.0) as (base, client),
    ):
        same = "https://same.blackhole.test/"
        alices = asyncio.create_task(register(client, base, ALICE, same))
        await dns.until(lambda: dns.asks("same.blackhole.test") > 0, within=_GUARD)
        bobs = asyncio.create_task(register(client, base, BOB, same))
        await asyncio.sleep(0.2)  # Bob's request reaches the lookup (nothing to wait on)
        await _hung_up(alices)
        async with asyncio.timeout(_GUARD):
            reply = await register(client, base, ALICE, _hook(rec))
        bob_waits = not bobs.done()
        await _until_sockets(dns, 1)  # the shared lookup is still out, for Bob
        dns.release()
        bob = await asyncio.wait_for(bobs, _GUARD)
    assert "result" in reply, reply
    assert bob_waits
    assert "could not be resolved" in bob["error"]["message"], bob
    assert {name for name, _type in dns.asked} == {"same.blackhole.test", "alice.hooks.test"}


async def test_a_shared_lookup_is_charged_to_the_callers_still_waiting() -> None:
    # The same rule on the policy alone: Bob joins Alice's lookup, Alice stops waiting,
    # and her next lookup runs at once while Bob's (the first one, never a second) waits.
    async with name_server({"alice.hooks.test": ["93.184.215.14"]}) as dns:
        resolver = AresResolver([dns.address])
        policy = PushUrlPolicy(resolver=resolver, lookup_timeout=600.0)
        alice = asyncio.create_task(policy.check("https://same.blackhole.test/", "alice"))
        await dns.until(lambda: dns.asks("same.blackhole.test") > 0, within=_GUARD)
        bob = asyncio.create_task(policy.check("https://same.blackhole.test/", "bob"))
        for _ in range(3):
            await asyncio.sleep(0)  # Bob's check joins the lookup
        await _hung_up(alice)
        async with asyncio.timeout(_GUARD):
            assert await policy.check("https://alice.hooks.test/", "alice") is None
        assert not bob.done() and resolver.pending == 1
        policy.close()
        assert await bob == "host 'same.blackhole.test' could not be resolved"
    assert dns.asks("same.blackhole.test") >= 1
    assert {name for name, _type in dns.asked} == {"same.blackhole.test", "alice.hooks.test"}


async def test_a_grpc_caller_that_cancels_gets_its_lookup_slot_back_at_once() -> None:
    # The same over gRPC: the server cancels a call its client cancelled, and the lookup
    # nobody else waits for ends with it.
    grpc_port = free_port()
    async with (
        name_server({"alice.hooks.test": ["127.0.0.1"]}) as dns,
        receiver() as rec,
        push_agent(
            push_timeout=600.0,
            api_keys=(f"{ALICE}=alice",),
            push_dns_servers=[dns.address],
            grpc_port=grpc_port,
        ) as (base, _app),
        httpx.AsyncClient(timeout=60, verify=TLS) as client,
        stubs(f"127.0.0.1:{grpc_port}") as (v1, _v03),
    ):
        made = await first_answer(client, base, "SendMessage", {"message": add_message()}, ALICE)
        config = TaskPushNotificationConfig(
            task_id=made["result"]["task"]["id"], id="stuck", url="https://g.blackhole.test/"
        )
        call = v1.CreateTaskPushNotificationConfig(config, metadata=(("x-api-key", ALICE),))
        await dns.until(lambda: dns.asks("g.blackhole.test") > 0, within=_GUARD)
        call.cancel()
        async with asyncio.timeout(_GUARD):
            reply = await register(client, base, ALICE, _hook(rec), "create")
        await _until_sockets(dns, 0)
    assert "result" in reply, reply
