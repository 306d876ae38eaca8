"""``X-Forwarded-For`` is trusted only from configured proxies (issue 40 item 8).

Anonymous callers are counted by address (``ip:<address>``). uvicorn's default trusts the
forwarded headers of any client on 127.0.0.1, so a local caller could name a new address
per request and pass every per-caller quota; ``serve`` now trusts them only from
``forwarded_allow_ips`` (default: none). Measured through ``apcore-a2a serve``: with
``max_streams_per_caller 1``, streams that each claim another ``X-Forwarded-For``.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import httpx

from tests._postgres import pg_schema_url
from tests._support import TLS, cli_server

QUOTA = 1
ATTEMPTS = 4


def _stream_body() -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
               "parts": [{"data": {"seconds": 3}}], "metadata": {"skillId": "jobs.sleep"}}  # fmt: skip
    return {"message": message}


async def _opened(base: str, forwarded: str) -> int:
    """The status of a stream that claims to come from *forwarded* (held 1 s if opened)."""
    headers = {"A2A-Version": "1.0", "X-Forwarded-For": forwarded}
    async with (
        httpx.AsyncClient(timeout=30, verify=TLS) as http,
        http.stream("POST", base + "/message:stream", json=_stream_body(), headers=headers) as r,
    ):
        if r.status_code == 200:
            await asyncio.sleep(1.0)  # hold the slot while the others ask
        return r.status_code


async def _streams_opened(base: str) -> int:
    statuses = await asyncio.gather(
        *(_opened(base, f"203.0.113.{i}") for i in range(1, ATTEMPTS + 1))
    )
    assert set(statuses) <= {200, 429}, statuses
    return statuses.count(200)


def _serve(*extra: str) -> contextlib.AbstractContextManager[tuple[str, Any]]:
    args = ["--extensions-dir", "examples/extensions", "--max-streams-per-caller", str(QUOTA)]
    return cli_server([*args, *extra])


async def test_forwarded_for_from_an_untrusted_client_is_ignored() -> None:
    with _serve() as (base, _proc):
        assert await _streams_opened(base) == QUOTA  # main: 4 of 4 (spoofed addresses)


async def test_forwarded_for_from_a_configured_proxy_names_the_caller() -> None:
    with _serve("--forwarded-allow-ip", "127.0.0.1") as (base, proc):
        assert await _streams_opened(base) == ATTEMPTS  # each forwarded address its own caller
        # the CLI runs uvicorn with the setting: no note that HTTP reads another server's
        assert "forwarded_allow_ips (" not in proc.output()


async def test_a_forwarded_name_of_any_length_is_a_caller_like_any_other() -> None:
    """A trusted proxy may forward what it was sent, an address or not: a 300-character
    name is one caller's key like any other, bounded as an owner is, on a store whose
    quota rows hold 255 characters (cluster mode, PostgreSQL)."""
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(pg_schema_url())
        args = ["--extensions-dir", "examples/extensions", "--task-store", url, "--cluster"]
        args += ["--forwarded-allow-ip", "127.0.0.1", "--max-unfinished-tasks-per-caller", "1"]
        base, _proc = stack.enter_context(cli_server(args))
        message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                   "parts": [{"data": {"a": 2, "b": 40}}], "metadata": {"skillId": "math.add"}}  # fmt: skip
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        headers = {"A2A-Version": "1.0", "X-Forwarded-For": "x" * 300}
        async with httpx.AsyncClient(timeout=30, verify=TLS) as http:
            answer = (await http.post(base + "/", json=body, headers=headers)).json()
        assert "result" in answer, answer
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_one_ipv6_network_holds_one_callers_streams() -> None:
    """A host holds a /64 at least: its addresses are one caller for the stream quota, so
    many of them cannot take ``max_streams`` from everyone; another /64 is another caller."""
    with _serve("--forwarded-allow-ip", "127.0.0.1") as (base, _proc):
        one_host = [f"2001:db8:1:2::{i:x}" for i in range(1, ATTEMPTS + 1)]
        statuses = await asyncio.gather(
            *(_opened(base, address) for address in [*one_host, "2001:db8:1:3::1"])
        )
        assert set(statuses) <= {200, 429}, statuses
        assert statuses[:-1].count(200) == QUOTA
        assert statuses[-1] == 200
