"""Another origin's host NAME is judged by what it resolves to, and connected to there.

With ``allow_other_origins=True`` a card may name another origin, but not one further in
than the agent: a name resolving to the cloud metadata service or to link-local addresses
is refused as the literal address is, and the client connects to the address it checked,
never to a second lookup's answer (DNS rebinding). The names are answered by a real name
server the test controls (tests/push/_dns.py), read through the client's ``resolver``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from a2a.server.routes import create_agent_card_routes
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette

from apcore_a2a._egress import agents_class
from apcore_a2a.client import A2AClient, A2AConnectionError, CrossOriginEndpointError
from apcore_a2a.client._calls import Caller, OtherOrigins
from apcore_a2a.client.card import Endpoint
from apcore_a2a.push.dns import AresResolver
from tests._support import TLS, free_port, running_server
from tests.bindings._grpc import self_signed_cert
from tests.client._sdk_agent import agent_card
from tests.client.test_hostile_grpc_agent import _grpc_agent
from tests.push._dns import NameServer, name_server

from ._stub_agent import CARD_V10, StubAgent, json_reply
from .conftest import refuse_sockets

TASK = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_COMPLETED"}}
METADATA = ["169.254.169.254", "fd00:ec2::254", "100.100.100.200", "169.254.10.1", "fe80::1"]


def _task(_body: object) -> tuple[int, dict[str, str], list[bytes]]:
    return json_reply({"jsonrpc": "2.0", "id": 1, "result": TASK})


@contextlib.asynccontextmanager
async def _card_naming(host: str) -> AsyncIterator[tuple[str, StubAgent, NameServer, int]]:
    """The agent on 127.0.0.1 (loopback), its card naming ``http://HOST:PORT/rpc``, where a
    stub listens on 127.0.0.1; a name server answering nothing yet."""
    elsewhere = StubAgent(rpc=_task)
    port = free_port()
    async with running_server(elsewhere, port=port), name_server() as names:
        card = dict(CARD_V10)
        card["supportedInterfaces"] = [
            {
                "url": f"http://{host}:{port}/rpc",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ]
        async with running_server(StubAgent(rpc=_task, card=card)) as url:
            yield url, elsewhere, names, port


@pytest.mark.parametrize("address", METADATA)
async def test_a_name_resolving_to_the_metadata_service_is_not_followed(address: str) -> None:
    async with _card_naming("meta.test") as (url, elsewhere, names, _port):
        names.table["meta.test"] = [address]
        resolver = AresResolver([names.address])
        async with A2AClient(url, allow_other_origins=True, resolver=resolver) as client:
            await client.discover()
            with refuse_sockets() as attempts, pytest.raises(CrossOriginEndpointError) as err:
                await client.get_task("t-1")
    assert "meta.test" in err.value.message and "link-local" in err.value.message
    assert attempts == [], "nothing connected to the name's address"
    assert elsewhere.seen == []


async def test_one_bad_address_among_good_ones_refuses_the_name() -> None:
    async with _card_naming("mixed.test") as (url, _elsewhere, names, _port):
        names.table["mixed.test"] = ["127.0.0.1", "169.254.169.254"]
        async with A2AClient(
            url, allow_other_origins=True, resolver=AresResolver([names.address])
        ) as client:
            with pytest.raises(CrossOriginEndpointError, match=r"169\.254\.169\.254"):
                await client.get_task("t-1")


async def test_the_client_connects_to_the_address_it_checked() -> None:
    """The name resolves to the agent's own class (loopback) when checked: the call goes to
    that address, the name in its Host header (the system's resolver knows no such name).
    Then the name is rebound to the metadata service: the next call looks it up again, is
    refused, and connects nowhere."""
    async with _card_naming("rebind.test") as (url, elsewhere, names, port):
        names.table["rebind.test"] = ["127.0.0.1"]
        async with A2AClient(
            url, allow_other_origins=True, resolver=AresResolver([names.address])
        ) as client:
            assert (await client.get_task("t-1"))["status"]["state"] == "completed"
            names.table["rebind.test"] = ["169.254.169.254"]
            with refuse_sockets() as attempts, pytest.raises(CrossOriginEndpointError):
                await client.get_task("t-1")
    assert attempts == []
    [seen] = elsewhere.seen
    assert seen.headers["host"] == f"rebind.test:{port}"


async def test_a_grpc_host_name_is_checked_and_dialled_at_the_checked_address() -> None:
    port = free_port()
    async with _grpc_agent(f"127.0.0.1:{port}") as (_url, hostile), name_server() as names:
        resolver = AresResolver([names.address])
        for name, address in (("meta.test", "169.254.169.254"), ("good.test", "127.0.0.1")):
            names.table[name] = [address]
        bad = agent_card(f"meta.test:{port}", versions=("1.0",), binding="GRPC")
        good = agent_card(f"good.test:{port}", versions=("1.0",), binding="GRPC")
        for card, works in ((bad, False), (good, True)):
            app = Starlette(routes=create_agent_card_routes(card))
            async with (
                running_server(app) as url,
                A2AClient(url, allow_other_origins=True, resolver=resolver, timeout=30) as client,
            ):
                if works:
                    assert (await client.send_message("hi"))["status"]["state"] == "completed"
                else:
                    with pytest.raises(CrossOriginEndpointError, match="link-local"):
                        await client.send_message("hi")
    assert len(hostile.metadata) == 1, "only the checked name's call reached the agent"


@pytest.mark.parametrize(("name", "verifies"), [("localhost", True), ("tls.test", False)])
async def test_over_tls_the_certificate_is_verified_for_the_name_not_the_address(
    name: str, verifies: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connected to the checked 127.0.0.1, the name is still the SNI and the name the
    certificate (for localhost and 127.0.0.1) is verified for: tls.test does not verify."""
    cert, key = self_signed_cert(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    elsewhere = StubAgent(rpc=_task)
    port = free_port()
    tls = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    async with running_server(elsewhere, port=port, **tls), name_server() as names:
        names.table["localhost"] = ["127.0.0.1"]  # c-ares reads /etc/hosts first anyway
        names.table["tls.test"] = ["127.0.0.1"]
        card = dict(CARD_V10)
        card["supportedInterfaces"] = [
            {
                "url": f"https://{name}:{port}/rpc",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ]
        async with (
            running_server(StubAgent(rpc=_task, card=card)) as url,
            A2AClient(url, allow_other_origins=True, resolver=AresResolver([names.address])) as c,
        ):
            if verifies:
                assert (await c.get_task("t-1"))["status"]["state"] == "completed"
            else:
                with pytest.raises(A2AConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
                    await c.get_task("t-1")
    assert len(elsewhere.seen) == int(verifies)


async def test_a_name_whose_dns_never_answers_is_given_up_on_at_the_timeout() -> None:
    async with _card_naming("stuck.blackhole.test") as (url, elsewhere, names, _port):
        resolver = AresResolver([names.address])
        async with A2AClient(url, allow_other_origins=True, resolver=resolver, timeout=1) as c:
            async with asyncio.timeout(60):  # the test's own guard
                with pytest.raises(A2AConnectionError, match="timed out"):
                    await c.get_task("t-1")
        assert resolver.pending == 0, "the lookup ended with the call"
        names.release()
    assert elsewhere.seen == []


async def test_for_an_agent_elsewhere_a_name_resolving_to_loopback_is_not_followed() -> None:
    """The agent at a name counts as public (never connected to here): a name
    of another origin resolving to the caller's own host (one of its addresses) is refused,
    before any connection."""
    async with name_server() as names:
        names.table |= {
            "loop.test": ["::1", "10.0.0.9"],
        }
        resolver = AresResolver([names.address])
        agent = agents_class("https://agent.test")
        transport = OtherOrigins("https://agent.test", resolver, agent)
        async with httpx.AsyncClient(transport=transport, timeout=5) as http:
            refused = pytest.raises(CrossOriginEndpointError, match=r"loopback address \(::1\)")
            with refuse_sockets() as attempts, refused:
                await http.get("http://loop.test:8080/rpc")
    assert attempts == []


@pytest.mark.parametrize("agent_has", ["127.0.0.1", "169.254.169.254"])
async def test_an_agent_naming_a_bad_address_among_its_own_opens_nothing(agent_has: str) -> None:
    """The agent's name is the agent's to answer for (a hostile agent adds an address of
    the caller's loopback or the metadata service to its own name, or answers so only to
    the client's second lookup): it does not make the agent count as being there, so a
    card's other-origin name resolving to loopback is still refused."""
    port = free_port()
    elsewhere = StubAgent(rpc=_task)
    async with running_server(elsewhere, port=port), name_server() as names:
        names.table |= {"agent.test": ["192.0.2.10", agent_has], "inside.test": ["127.0.0.1"]}
        to = Endpoint("JSONRPC", "1.0", f"http://inside.test:{port}/rpc")

        async def endpoint() -> Endpoint:
            return to

        async with httpx.AsyncClient(timeout=5, verify=TLS) as http:
            caller = Caller(http, "http://agent.test", endpoint, AresResolver([names.address]))
            try:
                with pytest.raises(CrossOriginEndpointError, match=r"loopback address"):
                    await caller.call("GetTask", pb.GetTaskRequest(id="t-1"))
            finally:
                await caller.aclose()
    assert elsewhere.seen == []


async def test_a_grpc_host_of_both_families_is_reached_on_either() -> None:
    """A dual-stack name whose first address takes no connection (the agent listens on
    IPv4 only, the name lists ::1 first): the channel tries every checked address, IPv4
    ones as IPv4-mapped, as HTTP calls do. Before, only the first family's were dialled."""
    port = free_port()
    async with _grpc_agent(f"127.0.0.1:{port}") as (_url, hostile), name_server() as names:
        names.table["both.test"] = ["::1", "127.0.0.1"]
        card = agent_card(f"both.test:{port}", versions=("1.0",), binding="GRPC")
        app = Starlette(routes=create_agent_card_routes(card))
        async with (
            running_server(app) as url,
            A2AClient(
                url, allow_other_origins=True, resolver=AresResolver([names.address]), timeout=30
            ) as client,
        ):
            assert (await client.send_message("hi"))["status"]["state"] == "completed"
    assert len(hostile.metadata) == 1
