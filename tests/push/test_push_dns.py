"""A webhook name whose DNS never answers cannot tie up the agent: its lookups run on a
few threads of their own and each registration is answered within ``push_timeout``,
while the event loop's shared resolver threads (database and JWKS host names) stay free."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import httpx
import pytest

from apcore_a2a.push.policy import MAX_LOOKUPS

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
    assert stuck[1] <= MAX_LOOKUPS
