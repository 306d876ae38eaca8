"""The client follows card URLs of the agent's origin only, and never leaks credentials.

Two real servers on 127.0.0.1: the agent (its card names an interface) and "elsewhere"
(another port, so another origin), both recording what reaches them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Generator
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest

from apcore_a2a.client import (
    A2AClient,
    A2AConnectionError,
    A2ADiscoveryError,
    CrossOriginEndpointError,
)
from apcore_a2a.client.card import check_endpoint, select_endpoint
from apcore_a2a.client.client import PUSH_STATUS_EXTENSION
from tests._support import free_port, running_server

from ._stub_agent import CARD_V10, StubAgent, card_for, json_reply
from .conftest import refuse_sockets

TASK = {
    "id": "t-1",
    "contextId": "c-1",
    "status": {"state": "TASK_STATE_COMPLETED"},
}


def task_reply(_body: object) -> tuple[int, dict[str, str], list[bytes]]:
    return json_reply({"jsonrpc": "2.0", "id": 1, "result": TASK})


class Signed(httpx.Auth):
    """A caller's own auth flow: adds a header (a stand-in for any signing scheme)."""

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        request.headers["X-Signature"] = "sig-1"
        yield request


@contextlib.asynccontextmanager
async def agent_pointing_elsewhere(
    path: str = "/rpc",
) -> AsyncIterator[tuple[str, StubAgent, StubAgent]]:
    elsewhere = StubAgent(rpc=task_reply)
    async with running_server(elsewhere) as other:
        card = dict(CARD_V10)
        card["supportedInterfaces"] = [
            {"url": other + path, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ]
        agent = StubAgent(rpc=task_reply, card=card)
        async with running_server(agent) as url:
            yield url, agent, elsewhere


async def test_card_naming_another_origin_is_refused_with_a_typed_error() -> None:
    async with agent_pointing_elsewhere() as (url, agent, elsewhere):
        async with A2AClient(url, auth="tok-secret", headers={"X-API-Key": "k-1"}) as client:
            with pytest.raises(CrossOriginEndpointError) as err:
                await client.get_task("t-1")
        assert isinstance(err.value, A2ADiscoveryError)
        assert err.value.url.startswith(elsewhere_url(agent))
        assert "allow_other_origins=True" in err.value.message
        assert elsewhere.seen == [], "nothing was sent to the other origin"
        assert [s.method for s in agent.seen] == ["GET"], "only the card was fetched"


def elsewhere_url(agent: StubAgent) -> str:
    return str(agent.card["supportedInterfaces"][0]["url"]).rsplit("/", 1)[0]


async def test_opting_in_follows_the_url_without_credentials() -> None:
    async with agent_pointing_elsewhere() as (url, agent, elsewhere):
        headers = {"X-API-Key": "k-1", "X-Trace": "on"}
        async with A2AClient(
            url, auth="tok-secret", headers=headers, allow_other_origins=True
        ) as client:
            task = await client.get_task("t-1")
        async with A2AClient(url, auth=Signed(), allow_other_origins=True) as signed:
            await signed.get_task("t-1")
    assert task["status"]["state"] == "completed"
    assert [s.rpc_method for s in elsewhere.seen] == ["GetTask", "GetTask"]
    for seen in elsewhere.seen:
        for name in ("authorization", "x-api-key", "x-trace", "x-signature", "cookie"):
            assert name not in seen.headers, name
        assert seen.headers["a2a-version"] == "1.0", "protocol headers still go"
    # The agent's own origin got the credentials with the card fetches.
    assert agent.seen[0].headers["authorization"] == "Bearer tok-secret"
    assert agent.seen[0].headers["x-api-key"] == "k-1"
    assert agent.seen[-1].headers["x-signature"] == "sig-1"


async def test_same_origin_interfaces_get_the_credentials() -> None:
    agent = StubAgent(rpc=task_reply)
    async with running_server(agent) as url:
        card = dict(CARD_V10)
        card["supportedInterfaces"] = [
            {"url": "/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ]
        agent.card = card
        async with A2AClient(url, auth=Signed(), headers={"X-API-Key": "k-1"}) as client:
            await client.get_task("t-1")
    post = agent.seen[-1]
    assert (post.method, post.path) == ("POST", "/a2a"), "a relative URL is the agent's"
    assert post.headers["x-signature"] == "sig-1"
    assert post.headers["x-api-key"] == "k-1"


@pytest.mark.parametrize(
    ("named", "base", "allowed"),
    [
        ("https://agent.example/rpc", "https://agent.example", True),
        ("https://agent.example:443/rpc", "https://agent.example", True),
        ("HTTPS://Agent.Example/rpc", "https://agent.example/base", True),
        ("http://agent.example/rpc", "https://agent.example", False),
        ("https://agent.example:8443/rpc", "https://agent.example", False),
        ("https://evil.example/rpc", "https://agent.example", False),
        ("https://agent.example.evil.example/rpc", "https://agent.example", False),
        # The same host to DNS, but another origin to a browser: the credentials stay home.
        ("https://agent.example./rpc", "https://agent.example", False),
        ("https://agent.example/rpc", "https://agent.example.", False),
        ("ftp://agent.example/rpc", "https://agent.example", False),
        ("/rpc", "https://agent.example/base", True),
    ],
)
def test_origin_rule(named: str, base: str, allowed: bool) -> None:
    if allowed:
        assert check_endpoint(named, base, allow_other_origins=False, direct=False)
        return
    with pytest.raises(CrossOriginEndpointError):
        check_endpoint(named, base, allow_other_origins=False, direct=False)


def test_https_downgrade_is_named_in_the_error() -> None:
    with pytest.raises(CrossOriginEndpointError, match="https downgraded to http"):
        check_endpoint(
            "http://agent.example/rpc",
            "https://agent.example",
            allow_other_origins=False,
            direct=False,
        )
    with pytest.raises(CrossOriginEndpointError):
        # Opting in covers other http(s) origins, never another scheme.
        check_endpoint(
            "file:///etc/passwd", "https://agent.example", allow_other_origins=True, direct=False
        )


def test_direct_mode_keeps_requests_on_the_in_process_app() -> None:
    moved = check_endpoint(
        "http://127.0.0.1:8000/a2a?x=1",
        "http://agent.local",
        allow_other_origins=False,
        direct=True,
    )
    assert moved == "http://agent.local/a2a?x=1"


class _Redirecting:
    """An agent that answers every request (card, JSON-RPC, keys) with a 307 to another
    origin."""

    def __init__(self, to: str) -> None:
        self.to = to

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await StubAgent()(scope, receive, send)
            return
        location = (self.to + scope["path"]).encode()
        start = {"type": "http.response.start", "status": 307}
        await send(start | {"headers": [(b"location", location)]})
        await send({"type": "http.response.body", "body": b""})


@pytest.mark.parametrize("protocol", ["auto", "1.0"])
async def test_a_redirect_to_another_origin_is_not_followed(protocol: str) -> None:
    """A redirect is never followed, so the caller's credentials cannot be carried to
    another origin by one: the call fails with the status, and nothing reaches there."""
    elsewhere = StubAgent(rpc=task_reply)
    async with running_server(elsewhere) as other, running_server(_Redirecting(other)) as url:
        client = A2AClient(
            url, auth="tok-secret", headers={"X-API-Key": "key-secret"}, protocol=protocol
        )
        async with client:
            with pytest.raises((A2AConnectionError, A2ADiscoveryError), match="307"):
                await client.send_message("x")
    assert elsewhere.seen == []


async def test_credentials_in_the_url_are_basic_auth_and_in_no_message() -> None:
    """``http://user:password@host`` authenticates every call to the agent (the card
    fetch only before: an absolute interface URL dropped them), and the password is in no
    error message nor in ``client.url``."""
    agent = StubAgent(rpc=task_reply)
    async with running_server(agent) as url:
        agent.card = CARD_V10 | {
            "supportedInterfaces": [
                {"url": url + "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ]
        }
        async with A2AClient(url.replace("://", "://ann:s%3Ac3ret@")) as client:
            assert client.url == url
            assert (await client.get_task("t-1"))["id"] == "t-1"
    basic = "Basic " + base64.b64encode(b"ann:s:c3ret").decode()
    assert [(s.path, s.headers.get("authorization")) for s in agent.seen] == [
        ("/.well-known/agent-card.json", basic),
        ("/rpc", basic),
    ]
    async with A2AClient(f"http://ann:s3cret@127.0.0.1:{free_port()}") as client:
        with pytest.raises(A2AConnectionError) as failed:
            await client.discover()
    assert "s3cret" not in str(failed.value)
    with pytest.raises(ValueError, match="credentials both"):
        A2AClient("http://ann:s3cret@127.0.0.1:1", auth="token")


def test_an_authorization_header_beside_auth_is_refused() -> None:
    """Both would go out as two Authorization headers, which an agent refuses (401,
    docs/auth.md): the client says so at construction, as for credentials in the URL."""
    for auth in ("token", ("ann", "s3cret")):
        with pytest.raises(ValueError, match="credentials both"):
            A2AClient("http://127.0.0.1:1", auth=auth, headers={"authorization": "Bearer x"})
    with pytest.raises(ValueError, match="credentials both"):
        A2AClient("http://ann:s3cret@127.0.0.1:1", headers={"Authorization": "Bearer x"})


#: Card URLs that lead out of the agent's network to the caller's own: the cloud metadata
#: service and the rest of link-local, in every spelling the resolver reads as an address
#: (decimal, hex, short forms, IPv4 inside IPv6), and loopback under an agent elsewhere.
_INWARD = [
    ("http://169.254.169.254/latest/meta-data/", "https://agent.example", "link-local"),
    ("http://2852039166/latest/", "https://agent.example", "link-local"),
    ("http://0xa9fea9fe/latest/", "https://agent.example", "link-local"),
    ("http://169.254.43518/latest/", "https://agent.example", "link-local"),
    ("http://[::ffff:169.254.169.254]/latest/", "https://agent.example", "link-local"),
    ("http://[fd00:ec2::254]/latest/", "https://agent.example", "link-local"),
    ("http://[2002:a9fe:a9fe::]/latest/", "https://agent.example", "link-local"),  # 6to4
    ("http://[64:ff9b::a9fe:a9fe]/latest/", "https://agent.example", "link-local"),  # NAT64
    # IPv4-translated (a SIIT translator on the way delivers it) and IPv4-compatible
    ("http://[::ffff:0:a9fe:a9fe]/latest/", "https://agent.example", "link-local"),
    ("http://[::a9fe:a9fe]/latest/", "https://agent.example", "link-local"),
    ("http://[::ffff:0:7f00:1]:8080/rpc", "https://agent.example", "loopback"),
    ("http://100.100.100.200/latest/meta-data/", "https://agent.example", "link-local"),
    ("http://[fe80::1%25eth0]:8080/rpc", "https://agent.example", "link-local"),
    ("http://169.254.1.1/rpc", "http://127.0.0.1:8000", "link-local"),
    ("http://127.0.0.1:8080/rpc", "https://agent.example", "loopback"),
    ("http://127.1:8080/rpc", "https://agent.example", "loopback"),
    ("http://[::1]:8080/rpc", "https://10.0.0.5", "loopback"),
    ("http://localhost:8080/rpc", "https://agent.example", "loopback"),
    ("http://0.0.0.0:8080/rpc", "https://agent.example", "loopback"),
    # the root's dot: a proxy (or a resolver) that drops it reads the address
    ("http://169.254.169.254./latest/", "https://agent.example", "link-local"),
    ("http://127.0.0.1.:8080/rpc", "https://agent.example", "loopback"),
]


@pytest.mark.parametrize(("named", "base", "kind"), _INWARD)
def test_other_origins_allowed_still_never_lead_inward(named: str, base: str, kind: str) -> None:
    with pytest.raises(CrossOriginEndpointError, match=f"is a {kind} address") as refused:
        check_endpoint(named, base, allow_other_origins=True, direct=False)
    assert "allow_other_origins" not in refused.value.message, "no opt-in follows it"
    with pytest.raises(CrossOriginEndpointError, match=f"is a {kind} address"):
        select_endpoint(
            {"supportedInterfaces": [{"url": named.split("://")[1].split("/")[0],
                                      "protocolBinding": "GRPC", "protocolVersion": "1.0"}]},
            base, "auto", allow_other_origins=True, direct=False,
        )  # fmt: skip


async def test_a_grpc_address_is_classed_as_grpc_reads_it_percent_decoded() -> None:
    # gRPC reads a host:port target as the URI dns:///host:port and percent-decodes it:
    # %31%32%37.0.0.1 is 127.0.0.1 to it (httpx, by contrast, looks the name up as spelt).
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"%31%32%37.0.0.1:{port}") as channel:
            await asyncio.wait_for(channel.channel_ready(), 10)
    finally:
        await server.stop(None)
    for named, kind in (
        (f"%31%32%37.0.0.1:{port}", "loopback"),
        ("grpc://%6c%6f%63%61%6c%68%6f%73%74:50051", "loopback"),  # localhost
        ("%31%36%39.254.169.254:80", "link-local"),
    ):
        with pytest.raises(CrossOriginEndpointError, match=f"is a {kind} address"):
            select_endpoint(
                {"supportedInterfaces": [
                    {"url": named, "protocolBinding": "GRPC", "protocolVersion": "1.0"}
                ]},
                "https://agent.example", "auto", allow_other_origins=True, direct=False,
            )  # fmt: skip


@pytest.mark.parametrize(
    ("named", "base"),
    [
        ("http://127.0.0.1:9000/rpc", "http://127.0.0.1:8000"),  # a local agent's other port
        ("http://localhost:9000/rpc", "http://[::1]:8000"),
        ("http://10.0.0.6:9000/rpc", "https://agent.internal"),  # private: a name's own net
        ("https://other.example/rpc", "https://agent.example"),
        ("https://[2001:4860::8888]/rpc", "https://agent.example"),
        ("http://169.254.1.1:9000/rpc", "http://169.254.1.1:8000"),  # the agent's own host
    ],
)
def test_other_origins_allowed_follow_the_agents_class_or_a_more_public_one(
    named: str, base: str
) -> None:
    assert check_endpoint(named, base, allow_other_origins=True, direct=False)


async def test_a_card_naming_the_metadata_service_is_refused_before_any_connection() -> None:
    agent = StubAgent(rpc=task_reply)
    agent.card = CARD_V10 | {
        "supportedInterfaces": [
            {
                "url": "http://169.254.169.254/latest/meta-data/",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ]
    }
    async with (
        running_server(agent) as url,
        A2AClient(url, auth="tok-secret", allow_other_origins=True) as client,
    ):
        await client.discover()
        with refuse_sockets() as attempts, pytest.raises(CrossOriginEndpointError):
            await client.get_task("t-1")
    assert attempts == []


class _RedirectingCalls:
    """An agent that serves its card (naming *binding* and *version* on its own origin, the
    push status extension too) and answers every other request with a 307 to *to*
    (``http://`` or another scheme)."""

    def __init__(self, to: str, binding: str, version: str) -> None:
        self.to, self.binding, self.version = to, binding, version
        self.stub = StubAgent()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/.well-known/agent-card.json":
            own = f"http://{scope['server'][0]}:{scope['server'][1]}"
            self.stub.card = card_for(own, self.binding, self.version)
            self.stub.card["capabilities"] = {"extensions": [{"uri": PUSH_STATUS_EXTENSION}]}
        if scope["type"] != "http" or scope["path"] == "/.well-known/agent-card.json":
            await self.stub(scope, receive, send)
            return
        await _Redirecting(self.to)(scope, receive, send)


@pytest.mark.parametrize("where", ["elsewhere", "file://", "ftp://"])
@pytest.mark.parametrize(
    ("binding", "version"),
    [("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0"), ("HTTP+JSON", "0.3")],
)
async def test_a_redirect_of_a_call_is_not_followed_on_any_binding(
    binding: str, version: str, where: str
) -> None:
    """Every transport of the SDK the client uses, and its own requests (push status; the
    card's key set is read the same way): a 307, to another origin or to another scheme,
    fails the call with its status and carries nothing there."""
    elsewhere = StubAgent(rpc=task_reply)
    async with running_server(elsewhere) as other:
        target = other if where == "elsewhere" else where + "127.0.0.1/etc"
        agent = _RedirectingCalls(target, binding, version)
        async with running_server(agent) as url, A2AClient(url, auth="tok-secret") as client:
            with pytest.raises(A2AConnectionError, match="307"):
                await client.get_task("t-1")
            with pytest.raises(A2AConnectionError, match="307"):
                await client.push_status("t-1")
    assert elsewhere.seen == []


@pytest.mark.parametrize(
    ("named", "allow", "said"),
    [
        # the agent's own origin, with the card's credentials: sent as basic auth in place
        # of the caller's bearer token (the call made as whoever the card chose)
        ("http://card:pw@{own}/rpc", False, "with credentials in it"),
        ("http://card@{own}/rpc", True, "with credentials in it"),
        # hosts httpx's IDNA refuses: a raw httpx.InvalidURL, or an "invalid result"
        ("http://\uff41gent.test:8000/rpc", True, "no usable URL"),
        ("http://xn--agent-.test:8000/rpc", True, "no usable URL"),
    ],
)
async def test_a_card_url_with_credentials_or_an_unusable_host_is_a_discovery_error(
    named: str, allow: bool, said: str
) -> None:
    agent = StubAgent(rpc=task_reply)
    async with running_server(agent) as url:
        own = url.split("//", 1)[1]
        agent.card = CARD_V10 | {
            "supportedInterfaces": [
                {
                    "url": named.format(own=own),
                    "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0",
                }
            ]
        }
        async with A2AClient(url, auth="tok-secret", allow_other_origins=allow) as client:
            with pytest.raises(A2ADiscoveryError, match=said) as err:
                await client.get_task("t-1")
    assert "pw" not in err.value.message
    assert [s.method for s in agent.seen] == ["GET"], "only the card was fetched"


@pytest.mark.parametrize(
    "named",
    [
        "https://agent.example@evil.example/rpc",
        "https://evil.example\\@agent.example/rpc",  # httpx: user "evil.example\\" too
        "https://:@agent.example/rpc",
    ],
)
def test_a_user_part_is_refused_whatever_the_origin(named: str) -> None:
    with pytest.raises(A2ADiscoveryError, match="with credentials in it"):
        check_endpoint(named, "https://agent.example", allow_other_origins=True, direct=False)
