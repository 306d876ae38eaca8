"""Webhook host names are looked up on c-ares (``push/dns.py``), against a real name server
on 127.0.0.1 (``_dns.py``) the agent is pointed at with ``push_dns_servers``: a name whose
DNS never answers costs a pending query, not one of a few threads, its lookup ends when
its caller stops waiting, and nothing waits for it at close or at exit."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import TaskPushNotificationConfig

from apcore_a2a.edge.call import CallRecord
from apcore_a2a.push import AresResolver, PushUrlPolicy
from apcore_a2a.push.lookups import MAX_LOOKUPS
from apcore_a2a.push.policy import Checked

from .._support import TLS, sse_frames
from ..bindings._agent import serve_agent
from ._agent import GATES, add_message, push_agent, receiver, rpc, skill_message
from ._dns import NameServer, name_server

ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef00"
#: More callers with names that never answer than there once were lookup threads (64).
STUCK_CALLERS = 100
_IMMEDIATELY = {"returnImmediately": True}
V1 = {"A2A-Version": "1.0"}
_POOL = httpx.Limits(max_connections=None, keepalive_expiry=1.0)


def _send_with_hook(url: str) -> dict[str, Any]:
    return {"message": add_message(), "configuration": {"taskPushNotificationConfig": {"url": url}}}


async def first_answer(
    client: httpx.AsyncClient, base: str, method: str, params: dict[str, Any], key: str
) -> dict[str, Any]:
    """The JSON-RPC answer of *method*, or the first event of its stream."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"A2A-Version": "1.0", "X-API-Key": key}
    async with client.stream("POST", base + "/", json=body, headers=headers) as got:
        if not got.headers.get("content-type", "").startswith("text/event-stream"):
            await got.aread()
            return got.json()  # type: ignore[no-any-return]
        async with contextlib.aclosing(sse_frames(got)) as frames:
            async for _id, frame in frames:
                return frame  # type: ignore[no-any-return]
    raise AssertionError("the stream ended without an event")


async def register(
    client: httpx.AsyncClient, base: str, key: str, url: str, how: str = "SendMessage"
) -> dict[str, Any]:
    """Register the webhook *url* as the caller of API key *key*: in a send
    (``SendMessage``, ``SendStreamingMessage``: the answer or the stream's first event),
    or created for a task just made (``create``)."""
    if how != "create":
        return await first_answer(client, base, how, _send_with_hook(url), key)
    made = await first_answer(client, base, "SendMessage", {"message": add_message()}, key)
    config = {"taskId": made["result"]["task"]["id"], "url": url}
    return await first_answer(client, base, "CreateTaskPushNotificationConfig", config, key)


@contextlib.asynccontextmanager
async def _agent_on(
    dns: NameServer, keys: list[str], push_timeout: float
) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    """A push agent looking webhook names up on *dns*, with an API key per caller."""
    api_keys = tuple(f"{key}=caller-{n}" for n, key in enumerate(keys))
    agent = push_agent(
        push_timeout=push_timeout,
        api_keys=api_keys,
        push_dns_servers=[dns.address],
        max_streams=len(keys),  # a stream each, for SendStreamingMessage
    )
    async with (
        agent as (base, _app),
        # Idle connections are let go well before uvicorn's (5 s, httpx's default too):
        # a request sent on one the server is closing fails (ReadError), and a burst of
        # 100 callers that keeps the agent busy for seconds left some idle that long.
        httpx.AsyncClient(timeout=60, limits=_POOL, verify=TLS) as client,
    ):
        yield base, client


def _stuck_names(dns: NameServer) -> set[str]:
    return {name for name, _type in dns.asked if name.endswith(".blackhole.test")}


def _sockets_to(dns: NameServer) -> int:
    """UDP sockets of this process's network namespace connected to *dns* (the queries'
    sockets: c-ares connects each to its name server)."""
    port = int(dns.address.rsplit(":", 1)[1])
    rows = Path("/proc/net/udp").read_text().splitlines()[1:]
    return sum(1 for row in rows if row.split()[2] == f"0100007F:{port:04X}")


@pytest.mark.parametrize("how", ["SendMessage", "SendStreamingMessage", "create"])
async def test_callers_whose_names_never_answer_leave_another_callers_lookup_free(
    how: str,
) -> None:
    # 100 callers each register a name their name server never answers; Bob's webhook,
    # registered while all 100 lookups are out, is looked up and accepted at once. With 64
    # lookup threads, 64 such callers refused every other caller's webhook.
    stuck_keys = [f"stuck-{n:03}-0123456789abcdef" for n in range(STUCK_CALLERS)]
    async with (
        name_server({"bob.hooks.test": ["127.0.0.1"]}) as dns,
        receiver() as rec,  # Bob's deliveries succeed: no retries for the agent's exit to end
        _agent_on(dns, [*stuck_keys, BOB], push_timeout=120.0) as (base, client),
    ):
        stuck = [
            asyncio.create_task(register(client, base, key, f"https://s{n}.blackhole.test/", how))
            for n, key in enumerate(stuck_keys)
        ]
        await dns.until(lambda: len(_stuck_names(dns)) == STUCK_CALLERS)
        bob_hook = f"http://bob.hooks.test:{httpx.URL(rec.base).port}/hook"
        reply = await register(client, base, BOB, bob_hook, how)
        still_out = sum(not task.done() for task in stuck)
        dns.release()
        refused = await asyncio.wait_for(asyncio.gather(*stuck), 120)
    assert "result" in reply, reply
    assert still_out == STUCK_CALLERS  # Bob's answer came while every stuck lookup waited
    for answer in refused:
        assert answer["error"]["code"] == -32602, answer
        assert "could not be resolved" in answer["error"]["message"], answer


async def test_a_callers_timeout_cancels_its_lookup_and_its_queries() -> None:
    # c-ares retries every 50 ms at first: a lookup still out after its caller's timeout
    # would keep its socket to the name server and go on asking.
    async with name_server() as dns:
        resolver = AresResolver([dns.address], timeout=0.05, tries=1000)
        policy = PushUrlPolicy(resolver=resolver, lookup_timeout=1.0)
        reason = await policy.check("https://slow.blackhole.test/", "alice")
        assert reason == "host 'slow.blackhole.test' could not be resolved within 1 s"
        assert dns.asks("slow.blackhole.test") > 2  # retried while Alice waited
        assert resolver.pending == 0
        assert _sockets_to(dns) == 0  # the queries' socket is closed: no retry can follow
        # Alice's slot came back with the cancelled lookup: her next one runs at once.
        dns.table["alice.hooks.test"] = ["93.184.215.14"]
        assert await policy.check("https://alice.hooks.test/", "alice") is None


async def test_a_lookup_shared_by_callers_ends_when_the_last_one_stops_waiting() -> None:
    async with name_server() as dns:
        resolver = AresResolver([dns.address])
        policy = PushUrlPolicy(resolver=resolver, lookup_timeout=30.0)
        patient = asyncio.create_task(policy.check("https://same.blackhole.test/", "bob"))
        await dns.until(lambda: dns.asks("same.blackhole.test") > 0)
        policy.lookup_timeout = 0.5  # Alice joins the lookup and gives up soon
        hers = await policy.check("https://same.blackhole.test/", "alice")
        assert hers == "host 'same.blackhole.test' could not be resolved within 0.5 s"
        assert resolver.pending == 1  # Bob still waits for it
        patient.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await patient
        assert resolver.pending == 0
        assert _sockets_to(dns) == 0
    assert {name for name, _type in dns.asked} == {"same.blackhole.test"}  # one lookup


async def test_a_caller_arriving_while_a_lookup_is_cancelled_gets_a_lookup_of_its_own() -> None:
    # Alice's lookup is being cancelled (her timeout ran out; the resolver takes a moment
    # to close its sockets) when Bob asks for the same name: he must not join the lookup
    # that is ending, whose end would reach him as a cancellation of his own request.
    cancelling, closed = asyncio.Event(), asyncio.Event()
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        if len(asked) == 1:
            try:
                await asyncio.Event().wait()  # never answers
            except asyncio.CancelledError:
                cancelling.set()
                await closed.wait()
                raise
        return ["93.184.215.14"]

    # Bob's own lookup answers at once but runs under the same timeout: 2 s, not 0.2, so
    # that a starved loop on a busy machine does not end it first (seen in CI)
    policy = PushUrlPolicy(resolver=resolve, lookup_timeout=2)
    alice = asyncio.create_task(policy.check("https://same.hooks.test/", "alice"))
    await cancelling.wait()
    bob = asyncio.create_task(policy.check("https://same.hooks.test/", "bob"))
    for _ in range(3):
        await asyncio.sleep(0)  # Bob's check runs up to its lookup
    closed.set()
    assert await asyncio.wait_for(bob, 10) is None
    assert await alice == "host 'same.hooks.test' could not be resolved within 2 s"
    assert asked == ["same.hooks.test", "same.hooks.test"]


async def test_lookups_in_flight_are_bounded_and_the_next_one_waits_its_turn() -> None:
    # One caller with many quota keys (API keys, anonymous IPv6 networks) starts a lookup
    # per key, each a UDP socket for push_timeout: at most MAX_LOOKUPS are out at once,
    # and Bob's lookup starts when one of them ends, not before.
    out: set[str] = set()

    async def resolve(host: str, port: int) -> list[str]:
        out.add(host)
        try:
            if host.endswith(".blackhole.test"):
                await asyncio.Event().wait()  # never answers
            return ["93.184.215.14"]
        finally:
            out.discard(host)

    policy = PushUrlPolicy(resolver=resolve, lookup_timeout=60)
    stuck = [
        asyncio.create_task(policy.check(f"https://s{n}.blackhole.test/", f"key-{n}"))
        for n in range(MAX_LOOKUPS + 10)
    ]
    try:
        for _ in range(10):
            await asyncio.sleep(0)  # every check runs up to its lookup
        assert len(out) == MAX_LOOKUPS
        bob = asyncio.create_task(policy.check("https://bob.hooks.test/", "bob"))
        stuck[0].cancel()  # its request ended: its lookup is cancelled, the next starts
        for _ in range(10):
            await asyncio.sleep(0)
        assert len(out) == MAX_LOOKUPS and not bob.done()  # first come, first served
        for task in stuck[1:11]:
            task.cancel()
        assert await asyncio.wait_for(bob, 60) is None
    finally:
        for task in stuck:
            task.cancel()
        await asyncio.gather(*stuck, return_exceptions=True)
    assert out == set()


async def test_close_ends_lookups_whose_names_never_answer() -> None:
    async with name_server() as dns:
        resolver = AresResolver([dns.address])
        policy = PushUrlPolicy(resolver=resolver, lookup_timeout=60.0)
        checks = [
            asyncio.create_task(policy.check(f"https://n{n}.blackhole.test/", f"caller-{n}"))
            for n in range(3)
        ]
        await dns.until(lambda: len(_stuck_names(dns)) == 3)
        policy.close()
        reasons = await asyncio.wait_for(asyncio.gather(*checks), 10)  # not the 60 s
        assert dns.held  # the name server still holds their queries
        assert resolver.pending == 0
        assert _sockets_to(dns) == 0
    assert reasons == [f"host 'n{n}.blackhole.test' could not be resolved" for n in range(3)]


_EXITING = """
import asyncio, sys
from apcore_a2a.push import AresResolver, PushUrlPolicy
from apcore_a2a.push.lookups import MAX_LOOKUPS

async def main():
    policy = PushUrlPolicy(resolver=AresResolver([sys.argv[1]]), lookup_timeout=60)
    asyncio.create_task(policy.check("https://exit.blackhole.test/", "alice"))
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    print("leaving", flush=True)

asyncio.run(main())
"""


async def test_the_process_exits_while_a_lookup_is_stuck() -> None:
    async with name_server() as dns:
        process = await asyncio.create_subprocess_exec(
            *(sys.executable, "-c", _EXITING, dns.address),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        await dns.until(lambda: dns.asks("exit.blackhole.test") > 0)
        # Told to leave while its lookup waits for an answer that never comes.
        output, _ = await asyncio.wait_for(process.communicate(b"go\n"), 30)
        assert dns.held  # its query was never answered
    assert (process.returncode, output) == (0, b"leaving\n")


#: Answers of the name server for the SSRF checks: public, non-public and mixed names.
SSRF_TABLE = {
    "v4.hooks.test": ["93.184.215.14"],
    "v6.hooks.test": ["2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
    "private4.hooks.test": ["10.1.2.3"],
    "private6.hooks.test": ["fd12:3456::1"],
    "metadata.hooks.test": ["169.254.169.254"],
    "mixed4.hooks.test": ["93.184.215.14", "192.168.0.7"],
    "mixed6.hooks.test": ["93.184.215.14", "::1"],
    "mapped.hooks.test": ["::ffff:127.0.0.1"],
}


@pytest.mark.parametrize("name", ["v4.hooks.test", "v6.hooks.test"])
async def test_a_public_name_is_accepted_with_the_addresses_its_dns_gave(name: str) -> None:
    async with name_server(SSRF_TABLE) as dns:
        policy = PushUrlPolicy(resolver=AresResolver([dns.address]))
        assert await policy.resolve(f"https://{name}/hook") == Checked(None, SSRF_TABLE[name])


@pytest.mark.parametrize(
    "name",
    [
        "private4.hooks.test",
        "private6.hooks.test",
        "metadata.hooks.test",
        "mixed4.hooks.test",
        "mixed6.hooks.test",
        "mapped.hooks.test",
    ],
)
async def test_a_name_with_any_non_public_address_is_refused(name: str) -> None:
    async with name_server(SSRF_TABLE) as dns:
        policy = PushUrlPolicy(resolver=AresResolver([dns.address]))
        assert await policy.resolve(f"https://{name}/hook") == Checked(
            f"host '{name}' resolves to a non-public address", []
        )


async def test_hosts_file_names_resolve_without_a_query() -> None:
    # /etc/hosts is read first, as by the system resolver: localhost (and any name an
    # operator or Docker put there) never reaches the name server.
    async with name_server() as dns:
        policy = PushUrlPolicy(allow_insecure=True, resolver=AresResolver([dns.address]))
        reason, addresses, proxy, _unresolved = await policy.resolve("http://localhost:9/hook")
        assert (reason, proxy) == (None, None)
        assert "127.0.0.1" in addresses
        assert set(addresses) <= {"127.0.0.1", "::1"}
    assert dns.asked == []


async def test_an_sdk_client_registers_a_localhost_webhook_and_it_is_delivered() -> None:
    # The official a2a-sdk client registers http://localhost:PORT/hook for a working task:
    # localhost comes from /etc/hosts (c-ares may add ::1, RFC 6761), the agent's name
    # server is never asked, and the task's events reach the receiver on 127.0.0.1.
    GATES[601] = asyncio.Event()
    async with (
        name_server() as dns,
        receiver() as rec,
        push_agent(push_dns_servers=[dns.address]) as (base, app),
        httpx.AsyncClient(timeout=30, verify=TLS) as http,
    ):
        params = {"message": skill_message("demo.gate", 601), "configuration": _IMMEDIATELY}
        reply = await rpc(http, base, "SendMessage", params)
        task_id = reply["result"]["task"]["id"]
        card = await A2ACardResolver(http, base).get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        hook = f"http://localhost:{httpx.URL(rec.base).port}/hook"
        created = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task_id, id="local", url=hook)
        )
        assert created.url == hook
        GATES[601].set()
        await rec.wait_for(lambda: bool(rec.accepted("/hook")))
        await app.state.a2a.extras["push"].sender.idle()
        delivered = rec.attempts("/hook")
    assert [d.status for d in delivered] == [204] * len(delivered)
    assert delivered[-1].event["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert dns.asked == []


def test_a_finished_lookup_keeps_nothing_of_its_call() -> None:
    # pycares destroys a closed channel on a thread of its own, whose loop holds the last
    # channel's socket callback until the next close: a callback that was the lookup's
    # method kept the lookup, its failed answer's traceback and so the whole call (its
    # request, its call record) for as long as no other lookup ended.
    with serve_agent(push_notifications=True, push_allow_insecure_urls=True) as agent:
        with httpx.Client(base_url=agent.url, timeout=30, verify=TLS) as http:
            params = {"taskId": "t", "url": f"http://{'x' * 300}/hook"}
            body = {"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig"}
            answer = http.post("/", json={**body, "params": params}, headers=V1).json()
        assert answer["error"]["code"] == -32602, answer
    gc.collect()
    left = [
        o
        for o in gc.get_objects()
        if isinstance(o, CallRecord) and o.method == "CreateTaskPushNotificationConfig"
    ]
    assert left == []
