"""Agent card discovery, TTL cache, protocol selection and client construction."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from apcore_a2a.client import (
    A2AClient,
    A2AConnectionError,
    A2ADiscoveryError,
    AgentCardFetcher,
)
from tests._support import free_port, running_server
from tests.client._sdk_agent import build_sdk_app
from tests.client._stub_agent import CARD_V10, Recorder, StubAgent, json_reply

STUB = "http://stub.local"
TASK_RESULT = {"task": {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}}


async def test_discover_caches_for_ttl_then_revalidates() -> None:
    port = free_port()
    app = Recorder(build_sdk_app(f"http://127.0.0.1:{port}"))
    # The TTL passing is the scenario; it is long enough that the two first discoveries
    # fall inside it even on a busy machine.
    async with running_server(app, port=port) as url, A2AClient(url, card_ttl=2.0) as client:
        first = await client.discover()
        second = await client.discover()
        assert app.card_fetches() == 1
        assert second == first and first["name"] == "SDK echo agent"
        await asyncio.sleep(2.1)
        third = await client.agent_card()
        assert app.card_fetches() == 2
        await client.discover(refresh=True)
        assert app.card_fetches() == 3
    assert third == first
    # The refetch after the TTL is conditional; the SDK answers 304 and the card stays.
    assert "if-none-match" not in app.seen[0].headers
    assert app.seen[1].headers["if-none-match"].startswith('W/"')


async def test_card_is_fetched_once_across_calls() -> None:
    port = free_port()
    app = Recorder(build_sdk_app(f"http://127.0.0.1:{port}"))
    async with running_server(app, port=port) as url, A2AClient(url) as client:
        for _ in range(3):
            await client.send_message("hello")
    assert app.card_fetches() == 1
    assert app.rpc_methods() == ["SendMessage"] * 3


async def test_fetcher_ttl_uses_the_given_monotonic_clock() -> None:
    now = [100.0]
    stub = StubAgent()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=stub)) as http:
        fetcher = AgentCardFetcher(http, STUB, ttl=60.0, clock=lambda: now[0])
        assert fetcher.cached is None
        await fetcher.fetch()
        now[0] = 159.9
        await fetcher.fetch()
        assert len(stub.seen) == 1
        now[0] = 160.0
        await fetcher.fetch()
        assert len(stub.seen) == 2
        fetcher.invalidate()
        await fetcher.fetch()
        assert len(stub.seen) == 3
    assert fetcher.card_url == STUB + "/.well-known/agent-card.json"
    with pytest.raises(ValueError):
        AgentCardFetcher(http, STUB, ttl=-1)


async def test_legacy_card_path_is_tried_second() -> None:
    url = "http://legacy.local"
    app = Recorder(build_sdk_app(url, legacy_card_only=True))
    async with A2AClient(url, app=app) as client:
        card = await client.discover()
        task = await client.send_message("hello")
    assert card["name"] == "SDK echo agent"
    assert [s.path for s in app.seen[:2]] == [
        "/.well-known/agent-card.json",
        "/.well-known/agent.json",
    ]
    assert task["status"]["state"] == "completed"


@pytest.mark.parametrize(
    ("card", "match"),
    [
        (b"{not json", r"not valid JSON \(Expecting property name .*\(char 1\)\)$"),
        ([1, 2, 3], "agent card object"),
        ({"description": "no name"}, "agent card object"),
    ],
    ids=["invalid-json", "array", "no-name"],
)
async def test_bad_cards_raise_discovery_error(card: object, match: str) -> None:
    async with A2AClient(STUB, app=StubAgent(card=card)) as client:
        with pytest.raises(A2ADiscoveryError, match=match):
            await client.discover()


async def test_missing_card_lists_both_paths() -> None:
    async with A2AClient(STUB, app=StubAgent(card_paths=())) as client:
        with pytest.raises(A2ADiscoveryError) as err:
            await client.send_message("hi")
    assert "agent-card.json → HTTP 404" in err.value.message
    assert "agent.json → HTTP 404" in err.value.message


async def test_unreachable_agent_is_a_connection_error() -> None:
    async with A2AClient(f"http://127.0.0.1:{free_port()}") as client:
        with pytest.raises(A2AConnectionError):
            await client.discover()


@pytest.mark.parametrize(
    ("versions", "method", "header"),
    [(("1.0", "0.3"), "SendMessage", "1.0"), (("0.3",), "message/send", "0.3")],
    ids=["card-declares-1.0", "card-declares-only-0.3"],
)
async def test_auto_protocol_follows_the_card(
    versions: tuple[str, ...], method: str, header: str
) -> None:
    url = "http://auto.local"
    app = Recorder(build_sdk_app(url, versions=versions))
    async with A2AClient(url, app=app) as client:
        task = await client.send_message("hello")
    assert task["status"]["state"] == "completed"
    rpc = [s for s in app.seen if s.rpc_method]
    assert [s.rpc_method for s in rpc] == [method]
    assert rpc[0].headers["a2a-version"] == header


async def test_legacy_v03_card_url_is_used() -> None:
    card = {"name": "old", "url": "http://stub.local/legacy-rpc", "protocolVersion": "0.3.0"}
    stub = StubAgent(
        card=card, rpc=lambda _b: json_reply({"jsonrpc": "2.0", "id": 1, "result": {}})
    )
    async with A2AClient(STUB, app=stub) as client:
        await client.delete_push_config("t-1", "c-1")
    assert stub.seen[-1].path == "/legacy-rpc"
    assert stub.seen[-1].rpc_method == "tasks/pushNotificationConfig/delete"
    assert stub.seen[-1].params == {"id": "t-1", "pushNotificationConfigId": "c-1"}


async def test_card_without_a_binding_the_client_speaks_is_refused() -> None:
    card = dict(CARD_V10)
    card["supportedInterfaces"] = [
        {"url": "http://stub.local/ws", "protocolBinding": "WEBSOCKET", "protocolVersion": "1.0"},
        {"url": "stub.local:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
    ]
    stub = StubAgent(card=card)
    # In-process, gRPC is out of reach (there is no socket to open a channel on).
    async with A2AClient(STUB, app=stub) as client:
        with pytest.raises(A2ADiscoveryError, match=r"no interface.*\(only GRPC, WEBSOCKET\)"):
            await client.send_message("hi")
    assert [s.method for s in stub.seen] == ["GET"]


async def test_pinned_protocol_works_without_a_card() -> None:
    reply = {"jsonrpc": "2.0", "id": 1, "result": TASK_RESULT["task"]}
    stub = StubAgent(card_paths=(), rpc=lambda _b: json_reply(reply))
    async with A2AClient(STUB + "/a2a/", app=stub, protocol="1.0") as client:
        task = await client.get_task("t-1")
        await client.get_task("t-1")
    assert task["status"]["state"] == "working"
    posts = [s for s in stub.seen if s.method == "POST"]
    assert [s.path for s in posts] == ["/a2a", "/a2a"]
    # The missing card is looked up once, not before every call.
    assert sum(1 for s in stub.seen if s.method == "GET") == 2


async def test_credentials_and_headers_are_sent() -> None:
    stub = StubAgent(
        rpc=lambda _b: json_reply({"jsonrpc": "2.0", "id": 1, "result": TASK_RESULT["task"]})
    )
    headers = {"X-API-Key": "k-1", "A2A-Version": "0.3"}
    async with A2AClient(STUB, app=stub, auth="tok-1", headers=headers) as client:
        await client.get_task("t-1")
    for seen in stub.seen:
        assert seen.headers["authorization"] == "Bearer tok-1"
        assert seen.headers["x-api-key"] == "k-1"
    # The caller's headers cannot override the negotiated protocol version.
    assert stub.seen[-1].headers["a2a-version"] == "1.0"


async def test_basic_auth_pair() -> None:
    stub = StubAgent(
        rpc=lambda _b: json_reply({"jsonrpc": "2.0", "id": 1, "result": TASK_RESULT["task"]})
    )
    async with A2AClient(STUB, app=stub, auth=("ann", "pw")) as client:
        await client.get_task("t-1")
    assert stub.seen[-1].headers["authorization"].startswith("Basic ")


@pytest.mark.parametrize(
    "url",
    ["nope", "ftp://agent", "http://", "http:///path", "http://h/?q=1", "http://h/#x", 42],
)
def test_invalid_urls_are_rejected(url: object) -> None:
    with pytest.raises(ValueError):
        A2AClient(url)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "base"),
    [
        ("http://h:8000/", "http://h:8000"),
        ("https://h/a2a//", "https://h/a2a"),
        ("http://h/.well-known/agent-card.json", "http://h"),
        ("http://h/x/.well-known/agent.json", "http://h/x"),
    ],
)
async def test_url_is_normalized(given: str, base: str) -> None:
    client = A2AClient(given)
    assert client.url == base
    await client.aclose()


@pytest.mark.parametrize(
    "kwargs",
    [{"protocol": "2.0"}, {"timeout": 0}, {"timeout": -1.0}, {"card_ttl": -5}],
)
def test_invalid_options_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        A2AClient(STUB, **kwargs)  # type: ignore[arg-type]
