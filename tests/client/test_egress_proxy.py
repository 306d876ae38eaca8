"""The client behind an egress proxy (``HTTP_PROXY``, read by httpx): an agent at an IPv6
literal is named to the proxy in brackets (``upstream/proxy_targets.py``), as a proxy must
read it. A real stub agent and a forward proxy on 127.0.0.1 that sends ``::1`` there."""

from __future__ import annotations

import pytest

from apcore_a2a.client import A2AClient
from tests._forward_proxy import forward_proxy, without_proxies
from tests._support import running_server

from ._stub_agent import CARD_V10, TASK, StubAgent, json_reply


async def test_an_agent_at_an_ipv6_literal_is_reached_through_the_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    without_proxies(monkeypatch)
    agent = StubAgent(rpc=lambda _b: json_reply({"jsonrpc": "2.0", "id": 1, "result": TASK}))
    async with running_server(agent) as url, forward_proxy({"::1": "127.0.0.1"}) as px:
        port = url.rsplit(":", 1)[1]
        base = f"http://[::1]:{port}"
        agent.card = CARD_V10 | {
            "supportedInterfaces": [
                {"url": f"{base}/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ]
        }
        monkeypatch.setenv("HTTP_PROXY", px.url)
        async with A2AClient(base, auth="tok") as client:
            assert (await client.get_task("t-1"))["id"] == "t-1"
    # The proxy reads the first request of a connection (the card); the call follows on it.
    assert px.asked == [f"GET {base}/.well-known/agent-card.json"]
    assert [(s.path, s.headers["host"]) for s in agent.seen] == [
        ("/.well-known/agent-card.json", f"[::1]:{port}"),
        ("/rpc", f"[::1]:{port}"),
    ]


@pytest.mark.parametrize("no_proxy", ["[::1]", "localhost,2001:db8::/32"])
def test_proxy_settings_httpx_cannot_read_are_a_value_error_naming_them(
    no_proxy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # httpx reads an IPv6 address in brackets, or an IPv6 network, in NO_PROXY as a URL
    # with a broken port, and its client fails to build with that parse error
    # (httpx.InvalidURL: "Invalid port: ':1]'"), which the CLI printed as a traceback.
    without_proxies(monkeypatch)
    monkeypatch.setenv("NO_PROXY", no_proxy)
    with pytest.raises(ValueError, match=r"^the environment's proxy settings .*NO_PROXY"):
        A2AClient("http://127.0.0.1:1")
