"""An event loop that cannot watch sockets (Windows' default ``ProactorEventLoop``) still
looks webhook names up: on the system resolver, on a few threads of the agent's own, said
once at WARNING. c-ares needs ``add_reader``/``add_writer``; without them every named
webhook would have waited for ``push_timeout`` and been refused, silently."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest

from apcore_a2a.push import AresResolver
from tests._support import TLS

from ._agent import add_message, push_agent, receiver, rpc
from ._dns import name_server


class _NoWatchLoop(asyncio.SelectorEventLoop):
    """A loop whose public socket watching is missing, as on ``ProactorEventLoop`` (the
    loop's own transports use its private methods and keep working)."""

    def add_reader(self, *args: Any) -> None:
        raise NotImplementedError

    def add_writer(self, *args: Any) -> None:
        raise NotImplementedError


async def _delivered_to(hosts: list[str]) -> set[str]:
    """Register a webhook per host (in a send) on a real agent; the paths delivered to."""
    async with (
        receiver() as rec,
        push_agent() as (base, _app),
        httpx.AsyncClient(timeout=30, verify=TLS) as client,
    ):
        port = rec.base.rsplit(":", 1)[1]
        for host in hosts:
            config = {"url": f"http://{host}:{port}/{host}"}
            send = {
                "message": add_message(),
                "configuration": {"taskPushNotificationConfig": config},
            }
            reply = await rpc(client, base, "SendMessage", send)
            assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", reply
        await rec.wait_for(lambda: {d.path for d in rec.log} >= {f"/{h}" for h in hosts})
        return {d.path for d in rec.log}


def test_a_loop_that_cannot_watch_sockets_looks_names_up_on_the_system_resolver(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="apcore_a2a.push.dns")
    hosts = ["localhost", "127.0.0.1", "localhost"]
    with asyncio.Runner(loop_factory=_NoWatchLoop) as runner:
        delivered = runner.run(_delivered_to(hosts))
    assert delivered == {"/localhost", "/127.0.0.1"}
    # Said once for the loop, however many lookups (registrations and deliveries) ran.
    warned = [r.getMessage() for r in caplog.records if r.name == "apcore_a2a.push.dns"]
    assert len(warned) == 1, warned
    assert "cannot watch sockets" in warned[0] and "system resolver" in warned[0]


async def _looked_up(name: str) -> tuple[list[str], list[str]]:
    """*name*'s addresses from a resolver pointed at a name server of the test's own, and
    the names that server was asked."""
    async with name_server() as dns:
        resolver = AresResolver([dns.address], tries=1000)
        try:
            # A guard against a hang, not a timing: c-ares would retry for ever.
            addresses = await asyncio.wait_for(resolver(name, 80), 60)
        finally:
            resolver.close()
        return addresses, [asked for asked, _type in dns.asked]


def test_a_name_that_needs_a_query_is_answered_on_such_a_loop() -> None:
    # c-ares takes ``127.1`` for a name to ask a name server about; the system resolver
    # reads it as 127.0.0.1 without asking anyone. On a loop that cannot watch sockets
    # the answer to c-ares's query was never read: the lookup waited for ever.
    with asyncio.Runner(loop_factory=_NoWatchLoop) as runner:
        addresses, asked = runner.run(_looked_up("127.1"))
    assert (addresses, asked) == (["127.0.0.1"], [])
