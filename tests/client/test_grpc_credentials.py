"""The caller's credentials over gRPC: as call metadata to the agent's host, never elsewhere.

docs/client.md, *gRPC*: ``headers`` and ``auth`` go with each call as metadata
(lowercased), to the agent's host only; a card naming a gRPC address on another host is
refused (``CrossOriginEndpointError``), or with ``allow_other_origins=True`` followed
without them. The agent is a real ``grpc.aio`` server on 127.0.0.1 recording the metadata
of each call (tests/client/test_hostile_grpc_agent.py).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncGenerator
from pathlib import Path

import httpx
import pytest
from a2a.server.routes import create_agent_card_routes
from starlette.applications import Starlette

from apcore_a2a.client import A2AClient, A2AConnectionError, CrossOriginEndpointError
from tests._support import free_port, running_server
from tests.bindings._grpc import self_signed_cert
from tests.client._sdk_agent import agent_card
from tests.client.test_hostile_grpc_agent import _grpc_agent

HEADERS = {"X-API-Key": "key-1", "Cookie": "session=s-1"}


@pytest.mark.parametrize(
    ("auth", "authorization"),
    [
        ("secret", "Bearer secret"),
        (("user", "pw"), "Basic " + base64.b64encode(b"user:pw").decode()),
    ],
    ids=["bearer", "basic"],
)
async def test_the_credentials_reach_a_grpc_agent_on_the_agents_host(
    auth: str | tuple[str, str], authorization: str
) -> None:
    async with (
        _grpc_agent() as (url, hostile),
        A2AClient(url, auth=auth, headers=HEADERS, timeout=30) as client,
    ):
        await client.send_message("hi")
        await client.send_message("again")  # each call, not the first only
    assert len(hostile.metadata) == 2
    for seen in hostile.metadata:
        assert seen["authorization"] == authorization
        assert (seen["x-api-key"], seen["cookie"]) == ("key-1", "session=s-1")


async def test_the_credentials_never_reach_a_grpc_address_on_another_host() -> None:
    # The card, fetched from 127.0.0.1, names "localhost": the same machine, another host.
    async with _grpc_agent(f"localhost:{free_port()}") as (url, hostile):
        client = A2AClient(url, auth="secret", headers=HEADERS, timeout=30)
        async with client:
            with pytest.raises(CrossOriginEndpointError, match="not on the agent's host"):
                await client.send_message("hi")
        assert hostile.metadata == []
        followed = A2AClient(
            url, auth="secret", headers=HEADERS, timeout=30, allow_other_origins=True
        )
        async with followed:
            assert (await followed.send_message("hi"))["status"]["state"] == "completed"
    [seen] = hostile.metadata
    assert not {"authorization", "x-api-key", "cookie"} & set(seen), seen


@pytest.mark.parametrize("allow_other_origins", [False, True])
async def test_the_credentials_never_go_in_plaintext_from_an_https_agent(
    allow_other_origins: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent reached over https whose card names its own host over plaintext gRPC
    (``http://HOST:PORT``): another origin, as ``http://`` under ``https://`` is for HTTP.
    Before: the token went with the call, readable by anyone on the way."""
    cert, key = self_signed_cert(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # this test's client trusts the card's TLS
    address = f"127.0.0.1:{free_port()}"
    card = agent_card(f"http://{address}", versions=("1.0",), binding="GRPC")
    cards = Starlette(routes=create_agent_card_routes(card))
    tls = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    async with _grpc_agent(address) as (_plain, hostile), running_server(cards, **tls) as url:
        https = url.replace("http://", "https://", 1)
        client = A2AClient(https, auth="secret", allow_other_origins=allow_other_origins)
        async with client:
            if not allow_other_origins:
                with pytest.raises(CrossOriginEndpointError, match="plaintext"):
                    await client.send_message("hi")
            else:
                assert (await client.send_message("hi"))["status"]["state"] == "completed"
    assert [seen for seen in hostile.metadata if "authorization" in seen] == []
    assert len(hostile.metadata) == int(allow_other_origins)


class _TokenNeverComes(httpx.Auth):
    """Credentials of a call fetched from a token source that does not answer (the card's
    fetch, a GET, needs none: its own wait is bounded apart)."""

    def __init__(self) -> None:
        self.asked = 0

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        if request.method != "GET":
            self.asked += 1
            await asyncio.Event().wait()
        yield request


@pytest.mark.parametrize("streams", [False, True])
async def test_a_slow_token_source_is_bounded_by_the_calls_timeout(streams: bool) -> None:
    """Before: the metadata's auth flow ran before the call's deadline began, so a token
    source that never answered held the call for ever, whatever ``timeout=`` said."""
    auth = _TokenNeverComes()
    async with _grpc_agent() as (url, hostile), A2AClient(url, auth=auth, timeout=1) as client:
        async with asyncio.timeout(60):  # the test's own guard: before the fix, for ever
            with pytest.raises(A2AConnectionError, match="timed out"):
                await (_drain(client) if streams else client.send_message("hi"))
    assert auth.asked == 1
    assert hostile.metadata == []


async def _drain(client: A2AClient) -> None:
    async for _event in client.stream_message("hi", max_retries=0):
        pass
