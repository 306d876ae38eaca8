"""``A2AClient.resubscribe`` resumes a dropped stream by itself, losing and repeating nothing.

The client talks to a real server through a TCP proxy that the test cuts mid-stream (every
connection aborted, the listener reopened on the same port).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apcore_a2a import A2AClient
from apcore_a2a.client.errors import A2AConnectionError

from .._proxy import TcpProxy
from .._support import ROOT, cli_server, free_port

EXTENSIONS = str(ROOT / "examples" / "extensions")


def _remaining(event: dict[str, Any]) -> list[int]:
    if event["kind"] != "artifact-update":
        return []
    return [
        int(part["data"]["remaining"])
        for part in event["artifact"]["parts"]
        if isinstance(part.get("data"), dict) and "remaining" in part["data"]
    ]


@contextlib.asynccontextmanager
async def _behind_proxy(protocol: Any = "auto") -> AsyncIterator[tuple[A2AClient, TcpProxy]]:
    """The examples agent reached through a proxy the test can cut, and a client for it."""
    port = free_port()
    proxy = TcpProxy("127.0.0.1", port)
    await proxy.start()
    public = f"http://127.0.0.1:{proxy.port}"
    args = ["--extensions-dir", EXTENSIONS, "--url", public]
    try:
        with cli_server(args, port=port):
            async with A2AClient(public, protocol=protocol) as client:
                yield client, proxy
    finally:
        await proxy.stop()


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_resubscribe_survives_a_cut_connection(protocol: Any) -> None:
    async with _behind_proxy(protocol) as (client, proxy):
        task = await client.send_message(
            {"start": 12, "delay": 0.1}, skill_id="text.countdown", return_immediately=True
        )
        kinds: list[str] = []
        live: list[int] = []
        async for event in client.resubscribe(task["id"]):
            kinds.append(event["kind"])
            live += _remaining(event)
            if len(live) == 3:
                await proxy.stop()  # the stream's connection is gone
                await proxy.start()
    assert kinds[0] == "task" and kinds.count("task") == 1  # the snapshot, once
    assert live == list(range(live[0], -1, -1)), live  # every chunk after it, once
    assert kinds[-1] == "status-update"


async def test_resubscribe_gives_up_after_its_retries() -> None:
    async with _behind_proxy() as (client, proxy):
        task = await client.send_message(
            {"start": 20, "delay": 0.1}, skill_id="text.countdown", return_immediately=True
        )

        async def follow() -> None:
            async for event in client.resubscribe(task["id"], max_retries=2):
                if _remaining(event):
                    await proxy.stop()  # and it stays down

        with pytest.raises(A2AConnectionError, match="gave up after 2 resume"):
            await follow()


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_stream_message_resumes_a_cut_stream_by_subscription(protocol: Any) -> None:
    async with _behind_proxy(protocol) as (client, proxy):
        kinds: list[str] = []
        live: list[int] = []
        async for event in client.stream_message(
            {"start": 10, "delay": 0.05}, skill_id="text.countdown"
        ):
            kinds.append(event["kind"])
            live += _remaining(event)
            if len(live) == 3:
                await proxy.stop()  # the message stream's connection is gone
                await proxy.start()
    assert kinds[0] == "task" and kinds.count("task") == 1  # resumed without a new snapshot
    assert live == list(range(10, -1, -1)), live  # every chunk once, in order
    assert kinds[-1] == "status-update" and len(kinds) == 14  # task, working, 11, completed
