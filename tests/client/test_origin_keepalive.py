"""Another origin's connections are kept alive per name (``allow_other_origins=True``).

Calls to one name of another origin share a connection; a connection is never used for
another name, even one on the same address, so each name's certificate is checked on a
connection of its own. The server is a bare TLS HTTP/1.1 server on 127.0.0.1 that notes
the SNI of each connection it accepts and how many are open; the names are answered by
the client's ``resolver``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from apcore_a2a.client import A2AClient, A2AConnectionError
from tests._kept_server import KeptServer, json_ok
from tests._support import running_server
from tests.bindings._grpc import self_signed_cert

from ._stub_agent import CARD_V10, TASK, StubAgent, json_reply

MAX_NAMES = 16  # _egress.MAX_NAMES
NAMES = [f"n{i}.test" for i in range(MAX_NAMES + 1)]
ANSWER = json_ok(json.dumps({"jsonrpc": "2.0", "id": 1, "result": TASK}).encode())


@contextlib.asynccontextmanager
async def _other_origin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[A2AClient, KeptServer, Any, dict[str, list[str]]]]:
    """A client of an agent on 127.0.0.1 whose card (read at every call) names
    ``https://NAME:PORT/rpc`` (``aim(NAME)``), NAME resolving to what ``table`` says
    (127.0.0.1 by default), where the server listens with a certificate for ``NAMES``
    (not ``other.test``)."""
    cert, key = self_signed_cert(tmp_path, *NAMES)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    server = KeptServer(ANSWER)
    tls.sni_callback = server.sni
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0, ssl=tls)
    port = listening.sockets[0].getsockname()[1]
    card = dict(CARD_V10)

    def aim(name: str) -> None:
        url = f"https://{name}:{port}/rpc"
        card["supportedInterfaces"] = [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ]

    table: dict[str, list[str]] = {}

    async def resolve(host: str, _port: int) -> list[str]:
        return table.get(host, ["127.0.0.1"])

    aim(NAMES[0])
    agent = StubAgent(rpc=lambda _body: json_reply({}), card=card)
    async with listening, running_server(agent) as url:
        client = A2AClient(url, allow_other_origins=True, resolver=resolve, card_ttl=0)
        async with client:
            yield client, server, aim, table


async def _called(client: A2AClient) -> None:
    assert (await client.get_task("t-1"))["status"]["state"] == "completed"


async def test_calls_to_one_name_of_another_origin_share_a_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, each call opened a connection of its own (three TLS handshakes)."""
    async with _other_origin(tmp_path, monkeypatch) as (client, server, _aim, _table):
        for _ in range(3):
            await _called(client)
        assert server.names == [NAMES[0]]
        assert server.open == 1, "kept alive between the calls"
    await server.until_open(0)  # the closed client closed it


async def test_another_name_on_the_same_address_has_its_own_connection_and_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two names resolving to one address each have their connection (their own SNI and
    certificate check); a third, which the certificate does not name, is refused although
    a verified connection to its address is open."""
    async with _other_origin(tmp_path, monkeypatch) as (client, server, aim, _table):
        for name in (NAMES[0], NAMES[1], NAMES[0], NAMES[1]):
            aim(name)
            await _called(client)
        assert server.names == NAMES[:2]
        aim("other.test")
        with pytest.raises(A2AConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
            await _called(client)
        assert server.names == [*NAMES[:2], "other.test"]


async def test_the_least_recently_used_names_connections_are_closed_past_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _other_origin(tmp_path, monkeypatch) as (client, server, aim, _table):
        for name in NAMES[:-1]:
            aim(name)
            await _called(client)
        assert server.open == MAX_NAMES, "none closed within the bound"
        aim(NAMES[-1])
        await _called(client)
        await server.until_open(MAX_NAMES)  # the first name's closed
        aim(NAMES[0])
        await _called(client)
        assert server.names == [*NAMES, NAMES[0]], "the first name connects again"
        await server.until_open(MAX_NAMES)  # and the second name's is closed


async def test_a_name_resolving_elsewhere_is_not_sent_on_its_kept_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every call looks its name up again: once the name resolves to another address
    (127.0.0.2, where nothing listens), the call goes there, not to the connection kept
    to the address it had; back on 127.0.0.1, that connection serves it again."""
    async with _other_origin(tmp_path, monkeypatch) as (client, server, _aim, table):
        await _called(client)
        table[NAMES[0]] = ["127.0.0.2"]
        with pytest.raises(A2AConnectionError):
            await _called(client)
        del table[NAMES[0]]
        await _called(client)
        assert server.names == [NAMES[0]]


async def test_a_name_with_a_call_in_flight_is_not_closed_past_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One caller's slow call is not cut by other calls to more names than are kept."""
    async with _other_origin(tmp_path, monkeypatch) as (client, server, aim, _table):
        server.held = release = asyncio.Event()
        slow = asyncio.create_task(_called(client))
        await server.holding.wait()
        for name in NAMES[1:]:
            aim(name)
            await _called(client)
        release.set()
        await slow
        assert server.names == NAMES


async def test_a_post_on_a_kept_connection_the_server_closed_is_not_sent_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server may have acted on a JSON-RPC call before it closed the connection: the
    call fails, sent once (push deliveries, which carry their id, are sent again)."""
    async with _other_origin(tmp_path, monkeypatch) as (client, server, _aim, _table):
        server.drop = True
        await _called(client)
        with pytest.raises(A2AConnectionError):
            await _called(client)
        assert server.dropped == 1
        await _called(client)  # on a new connection
