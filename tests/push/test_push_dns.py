"""A webhook name whose DNS never answers cannot tie up the agent: its lookups run on a
few threads of their own and each registration is answered within ``push_timeout``,
while the event loop's shared resolver threads (database and JWKS host names) stay free."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from apcore_a2a.push.policy import MAX_LOOKUPS

from .._support import sse_frames
from ._agent import add_message, push_agent, rpc


async def test_lookups_that_never_answer_hold_few_threads_and_are_refused_in_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # DNS is an edge we do not own: names under blackhole.test never answer until the
    # test ends (an attacker's name server that drops every query).
    release = threading.Event()
    lock = threading.Lock()
    stuck = [0, 0]  # now, most at once
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if not name.endswith(".blackhole.test"):
            return real(host, port, *args, **kwargs)
        with lock:
            stuck[0] += 1
            stuck[1] = max(stuck)
        try:
            release.wait(60)
            raise socket.gaierror(socket.EAI_AGAIN, "timed out")
        finally:
            with lock:
                stuck[0] -= 1

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    calls = 12  # twice the default executor's threads on this 2-core machine
    try:
        async with (
            push_agent(push_timeout=1.0) as (base, _app),
            httpx.AsyncClient(timeout=30) as client,
        ):

            async def register(n: int) -> dict[str, Any]:
                url = f"https://h{n}.blackhole.test/hook"
                config = {"taskPushNotificationConfig": {"url": url}}
                params = {"message": add_message(), "configuration": config}
                return await rpc(client, base, "SendMessage", params)

            replies = await asyncio.wait_for(
                asyncio.gather(*(register(n) for n in range(calls))), 20
            )
            # The loop's shared resolver threads are free meanwhile.
            found = await asyncio.wait_for(
                asyncio.get_running_loop().getaddrinfo("127.0.0.1", 80), 5
            )
            assert found
    finally:
        release.set()
    for reply in replies:
        assert reply["error"]["code"] == -32602, reply
        assert "could not be resolved within 1 s" in reply["error"]["message"], reply
    assert stuck[1] == 1  # one anonymous caller: one lookup in flight at a time


class _Dns:
    """The DNS edge, replaced: names under ``blackhole.test`` never answer until
    :meth:`release`; names under ``hooks.test`` resolve to 127.0.0.1; the rest as usual."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.stuck = threading.Condition()
        self.now = 0
        self.most = 0
        self.asked: list[str] = []
        self._real = socket.getaddrinfo

    def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name.endswith(".hooks.test"):
            return self._real("127.0.0.1", port, *args, **kwargs)
        if not name.endswith(".blackhole.test"):
            return self._real(host, port, *args, **kwargs)
        with self.stuck:
            self.asked.append(name)
            self.now += 1
            self.most = max(self.most, self.now)
            self.stuck.notify_all()
        try:
            self.released.wait(60)
            raise socket.gaierror(socket.EAI_AGAIN, "timed out")
        finally:
            with self.stuck:
                self.now -= 1

    async def stuck_lookups(self, count: int) -> None:
        """Wait until *count* lookups are stuck (in a thread: the agent shares this loop)."""

        def wait() -> bool:
            with self.stuck:
                return self.stuck.wait_for(lambda: self.now >= count, 20)

        assert await asyncio.to_thread(wait)


def _send_with_hook(url: str) -> dict[str, Any]:
    return {"message": add_message(), "configuration": {"taskPushNotificationConfig": {"url": url}}}


async def first_answer(
    client: httpx.AsyncClient, base: str, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """The JSON-RPC answer of *method*, or the first event of its stream."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with client.stream("POST", base + "/", json=body, headers={"A2A-Version": "1.0"}) as got:
        if not got.headers.get("content-type", "").startswith("text/event-stream"):
            await got.aread()
            return got.json()  # type: ignore[no-any-return]
        async with contextlib.aclosing(sse_frames(got)) as frames:
            async for _id, frame in frames:
                return frame  # type: ignore[no-any-return]
    raise AssertionError("the stream ended without an event")


ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef00"


async def register(client: httpx.AsyncClient, base: str, how: str, url: str) -> dict[str, Any]:
    """Register the webhook *url*: in a send (``SendMessage``, ``SendStreamingMessage``:
    the answer or the stream's first event), or created for a task just made (``create``)."""
    if how != "create":
        return await first_answer(client, base, how, _send_with_hook(url))
    made = await rpc(client, base, "SendMessage", {"message": add_message()})
    config = {"taskId": made["result"]["task"]["id"], "url": url}
    return await rpc(client, base, "CreateTaskPushNotificationConfig", config)


@contextlib.asynccontextmanager
async def _alice_and_bob(
    push_timeout: float,
) -> AsyncIterator[tuple[str, httpx.AsyncClient, httpx.AsyncClient]]:
    """A push agent with two API-key callers: its base URL and a client for each."""
    keys = (f"{ALICE}=alice", f"{BOB}=bob")
    async with (
        push_agent(push_timeout=push_timeout, api_keys=keys) as (base, _app),
        httpx.AsyncClient(timeout=30, headers={"X-API-Key": ALICE}) as alice,
        httpx.AsyncClient(timeout=30, headers={"X-API-Key": BOB}) as bob,
    ):
        yield base, alice, bob


@pytest.mark.parametrize("how", ["SendMessage", "SendStreamingMessage", "create"])
async def test_one_callers_stuck_lookups_leave_threads_for_another_caller(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    # Alice registers 8 never-answering names at once (twice the lookup threads there once
    # were); Bob's webhook, registered while hers are stuck, is looked up at once and
    # accepted.
    dns = _Dns()
    monkeypatch.setattr(socket, "getaddrinfo", dns.getaddrinfo)
    try:
        async with _alice_and_bob(push_timeout=3.0) as (base, alice, bob):
            hers = [
                asyncio.create_task(register(alice, base, how, f"https://a{n}.blackhole.test/"))
                for n in range(8)
            ]
            await dns.stuck_lookups(1)
            reply = await register(bob, base, how, "http://bob.hooks.test:9/")
            alice_replies = await asyncio.wait_for(asyncio.gather(*hers), 20)
    finally:
        dns.released.set()
    assert "result" in reply, reply  # looked up at once, not behind hers
    for refused in alice_replies:
        assert refused["error"]["code"] == -32602, refused
        assert "could not be resolved within 3 s" in refused["error"]["message"], refused
    # Her lookups ran one at a time (one lookup in flight per caller, docs/push.md): the
    # others waited for her own slot.
    assert dns.most == 1


async def test_concurrent_lookups_of_one_name_share_one_lookup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dns = _Dns()
    monkeypatch.setattr(socket, "getaddrinfo", dns.getaddrinfo)
    try:
        async with _alice_and_bob(push_timeout=2.0) as (base, alice, bob):
            same = "https://same.blackhole.test/hook"
            replies = await asyncio.wait_for(
                asyncio.gather(
                    *(
                        rpc(client, base, "SendMessage", _send_with_hook(same))
                        for client in (alice, bob) * 3
                    )
                ),
                20,
            )
    finally:
        dns.released.set()
    for refused in replies:
        assert "could not be resolved within 2 s" in refused["error"]["message"], refused
    assert dns.asked == ["same.blackhole.test"]


@pytest.mark.parametrize("stuck_callers", [4, MAX_LOOKUPS - 1])
async def test_callers_whose_names_never_answer_leave_lookups_for_every_other_caller(
    monkeypatch: pytest.MonkeyPatch, stuck_callers: int
) -> None:
    # Each of these callers holds one never-answering lookup (its one slot); four of them
    # took every lookup thread, and the other callers' webhooks were refused as
    # unresolvable though their DNS answers at once.
    dns = _Dns()
    monkeypatch.setattr(socket, "getaddrinfo", dns.getaddrinfo)
    stuck_keys = [f"stuck-{n}-0123456789abcdef" for n in range(stuck_callers)]
    other_keys = [f"other-{n}-0123456789abcdef" for n in range(4)]
    keys = tuple(f"{key}=caller-{key[:8]}" for key in (*stuck_keys, *other_keys))
    async with contextlib.AsyncExitStack() as stack:
        base, _app = await stack.enter_async_context(push_agent(push_timeout=3.0, api_keys=keys))
        clients = {
            key: await stack.enter_async_context(
                httpx.AsyncClient(timeout=30, headers={"X-API-Key": key})
            )
            for key in (*stuck_keys, *other_keys)
        }
        stack.callback(dns.released.set)
        stuck = [
            asyncio.create_task(
                register(clients[key], base, "SendMessage", f"https://s{n}.blackhole.test/")
            )
            for n, key in enumerate(stuck_keys)
        ]
        await dns.stuck_lookups(stuck_callers)
        others = await asyncio.wait_for(
            asyncio.gather(
                *(
                    register(clients[key], base, "SendMessage", f"http://o{n}.hooks.test:9/")
                    for n, key in enumerate(other_keys)
                )
            ),
            20,
        )
        refused = await asyncio.wait_for(asyncio.gather(*stuck), 20)
    answered = [reply for reply in others if "result" in reply]
    assert len(answered) == len(other_keys), others
    for reply in refused:
        assert "could not be resolved within 3 s" in reply["error"]["message"], reply
