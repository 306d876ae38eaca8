"""The client's gRPC calls behind an egress proxy: the proxy the HTTP calls to that host
take, by httpx's rule (``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``, any case, ``NO_PROXY``),
never grpcio's own reading of the environment (``client/_calls.py``). A real gRPC
agent on 127.0.0.1, its card over HTTP, and a real ``CONNECT`` proxy recording what it is
asked (docs/client.md, *gRPC*)."""

from __future__ import annotations

import base64

import pytest

from apcore_a2a.client import A2AClient, A2AConnectionError
from tests._forward_proxy import forward_proxy, without_proxies
from tests._support import free_port
from tests.client.test_hostile_grpc_agent import _grpc_agent

#: (environment, whether the agent's calls go through the proxy) with PX the proxy's URL:
#: the card's HTTP fetch and the gRPC call alike. grpcio alone read lower-case names only,
#: took https_proxy for a plaintext channel, NO_PROXY and ALL_PROXY not, and grpc_proxy;
#: and given the proxy as a channel option, it still read no_grpc_proxy and no_proxy by
#: its own rule (upstream/grpc_proxies.py).
CASES = [
    ({"HTTP_PROXY": "PX"}, True),
    ({"http_proxy": "PX"}, True),
    ({"ALL_PROXY": "PX"}, True),
    ({"https_proxy": "PX"}, False),  # a plaintext agent: the http scheme's proxy
    ({"http_proxy": "PX", "NO_PROXY": "127.0.0.1"}, False),
    ({"HTTP_PROXY": "PX", "no_proxy": "localhost, 127.0.0.1"}, False),
    ({"grpc_proxy": "PX"}, False),  # grpcio's own name: not one the client reads
    # grpcio's own exemptions, which httpx does not read: through the proxy all the same
    ({"HTTP_PROXY": "PX", "no_grpc_proxy": "127.0.0.1"}, True),
    ({"HTTP_PROXY": "PX", "no_proxy": "127.0.0.0/8"}, True),  # a range httpx reads as one host
    ({"HTTP_PROXY": "PX", "no_proxy": "*.0.0.1"}, True),
]


@pytest.mark.parametrize(("env", "through"), CASES, ids=[" ".join(e) for e, _ in CASES])
async def test_a_grpc_agent_is_reached_as_its_card_is(
    env: dict[str, str], through: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_proxies(monkeypatch)
    async with _grpc_agent() as (url, agent), forward_proxy({}) as px:
        for name, value in env.items():
            monkeypatch.setenv(name, value.replace("PX", px.url))
        async with A2AClient(url, timeout=30) as client:
            assert (await client.send_message("hi"))["status"]["state"] == "completed"
    assert len(agent.metadata) == 1
    card, grpc = url.removeprefix("http://"), [a for a in px.asked if a.startswith("CONNECT")]
    if through:
        assert px.asked[0] == f"GET {url}/.well-known/agent-card.json", px.asked
        assert len(grpc) == 1 and grpc[0] != f"CONNECT {card}", px.asked
    else:
        assert px.asked == [], px.asked


async def test_the_proxy_s_credentials_go_with_the_grpc_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user and password in the proxy's URL (percent-encoded) are its Basic credentials,
    on the card's request and on the gRPC call's ``CONNECT`` alike."""
    without_proxies(monkeypatch)
    async with _grpc_agent() as (url, agent), forward_proxy({}) as px:
        monkeypatch.setenv("HTTP_PROXY", px.url.replace("://", "://u:p%40ss@"))
        async with A2AClient(url, timeout=30) as client:
            assert (await client.send_message("hi"))["status"]["state"] == "completed"
    assert [a.split(" ")[0] for a in px.asked] == ["GET", "CONNECT"], px.asked
    assert px.credentials == ["Basic " + base64.b64encode(b"u:p@ss").decode()] * 2
    assert len(agent.metadata) == 1


@pytest.mark.parametrize("proxy", ["https://127.0.0.1:9", "socks5h://u:pw-77@127.0.0.1:9"])
async def test_a_proxy_grpc_cannot_use_is_refused_not_passed_by(
    proxy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """grpcio skipped a proxy it cannot use without a word: the call went direct, past
    the operator's proxy. It is refused, naming the proxy without its credentials."""
    without_proxies(monkeypatch)
    async with _grpc_agent() as (url, agent):
        card_port = url.rsplit(":", 1)[1]
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.setenv("NO_PROXY", f"127.0.0.1:{card_port}")  # the card alone, direct
        async with A2AClient(url, timeout=30) as client:
            with pytest.raises(A2AConnectionError, match="http:// proxies only") as raised:
                await client.send_message("hi")
    assert "pw-77" not in str(raised.value)
    assert agent.metadata == []


async def test_an_unreachable_proxy_fails_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the proxy HTTP_PROXY names, nothing listening there: a connection error,
    the agent never called (grpcio read no HTTP_PROXY: the call went direct)."""
    without_proxies(monkeypatch)
    async with _grpc_agent() as (url, agent):
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")
        monkeypatch.setenv("NO_PROXY", f"127.0.0.1:{url.rsplit(':', 1)[1]}")
        async with A2AClient(url, timeout=30) as client:
            with pytest.raises(A2AConnectionError, match="SendMessage"):
                await client.send_message("hi")
    assert agent.metadata == []
