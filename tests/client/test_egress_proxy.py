"""The client behind an egress proxy (``HTTP_PROXY``, read by httpx): an agent at an IPv6
literal is named to the proxy in brackets (``upstream/proxy_targets.py``), as a proxy must
read it. A real stub agent and a forward proxy on 127.0.0.1 that sends ``::1`` there."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from apcore_a2a.client import A2AClient, A2AConnectionError
from tests._forward_proxy import forward_proxy, without_proxies
from tests._support import cli, free_port, running_server

from ._apcore_agent import build_our_app
from ._stub_agent import CARD_V10, TASK, StubAgent, json_reply
from .test_origins import agent_pointing_elsewhere

SOCKS = "socks5://user:pw-4242@127.0.0.1:1080"
EXTRA = "a socks5 proxy needs the socksio package: pip install httpx[socks]"


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


@pytest.mark.parametrize(
    ("settings", "scheme", "reason"),
    [
        ({"ALL_PROXY": SOCKS}, "http", EXTRA),
        ({"HTTPS_PROXY": SOCKS}, "https", EXTRA),
        ({"http_proxy": SOCKS, "NO_PROXY": "127.0.0.2"}, "http", EXTRA),
        (
            {"HTTP_PROXY": "ftp://user:pw-4242@127.0.0.1:9"},
            "http",
            "httpx takes http, https, socks5 and socks5h proxies",
        ),
    ],
    ids=["all", "https", "http", "ftp"],
)
def test_a_proxy_the_agent_would_be_sent_through_and_httpx_cannot_use_is_a_value_error(
    settings: dict[str, str], scheme: str, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No call could be made: refused in one line, the proxy's password not repeated
    # (httpx's own ValueError for an unknown scheme quoted the URL).
    without_proxies(monkeypatch)
    monkeypatch.setitem(sys.modules, "socksio", None)  # not installed, whatever this venv has
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError) as caught:
        A2AClient(f"{scheme}://127.0.0.1:1")
    assert str(caught.value) == (
        f"the environment's proxy settings (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY) cannot be used: "
        f"{reason}"
    )


#: Settings whose socks5 proxy the agent at http://127.0.0.1 is not sent through.
UNUSED = [
    {"ALL_PROXY": SOCKS, "NO_PROXY": "127.0.0.1"},
    {"ALL_PROXY": SOCKS, "no_proxy": "localhost, 127.0.0.1"},
    {"HTTPS_PROXY": SOCKS},  # the agent's calls are http
    {"HTTP_PROXY": "ftp://127.0.0.1:9", "NO_PROXY": "127.0.0.1"},  # a scheme httpx refuses
]


@pytest.mark.parametrize("settings", UNUSED, ids=["no-proxy", "no-proxy-list", "other", "ftp"])
async def test_a_proxy_the_agent_is_not_sent_through_is_not_judged(
    settings: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # httpx builds every proxy's transport with the client: without the socks extra the
    # client was refused (ValueError) for a proxy NO_PROXY keeps its agent from.
    without_proxies(monkeypatch)
    monkeypatch.setitem(sys.modules, "socksio", None)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    port = free_port()
    async with running_server(build_our_app(port), port=port) as url, A2AClient(url) as client:
        task = await client.send_message({"a": 2, "b": 5}, skill_id="demo.add")
    assert task["artifacts"][0]["parts"][0]["data"] == {"sum": 7}


async def test_the_cli_calls_an_agent_no_proxy_exempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_proxies(monkeypatch)
    (tmp_path / "socksio.py").write_text("raise ImportError('not installed')\n")  # as if so
    env = {"ALL_PROXY": SOCKS, "NO_PROXY": "127.0.0.1", "PYTHONPATH": str(tmp_path)}
    port = free_port()
    async with running_server(build_our_app(port), port=port) as url:
        code, out, err = await cli(
            "call", url, "--skill", "demo.add", "--data", '{"a": 2, "b": 5}', env=env
        )
    assert (code, err) == (0, "")
    assert json.loads(out)["artifacts"][0]["parts"][0]["data"] == {"sum": 7}


async def test_a_socks5_proxy_for_a_call_to_another_origin_is_a_connection_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The other origins' transport reads the proxies at the first call there: one set
    # since the client was made raised ImportError from that call.
    without_proxies(monkeypatch)
    monkeypatch.setitem(sys.modules, "socksio", None)
    async with (
        agent_pointing_elsewhere() as (url, _agent, elsewhere),
        A2AClient(url, allow_other_origins=True) as client,
    ):
        monkeypatch.setenv("ALL_PROXY", SOCKS)
        with pytest.raises(A2AConnectionError) as caught:
            await client.get_task("t-1")
    assert caught.value.message == (
        f"the proxy socks5://user:***@127.0.0.1:1080 cannot be used: {EXTRA}"
    )
    assert elsewhere.seen == []


async def test_the_cli_names_the_missing_extra_in_one_line_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_proxies(monkeypatch)
    (tmp_path / "socksio.py").write_text("raise ImportError('not installed')\n")  # as if so
    env = {"ALL_PROXY": SOCKS, "PYTHONPATH": str(tmp_path)}
    code, out, err = await cli("card", "http://127.0.0.1:1", env=env)
    assert (code, out) == (2, "")
    assert err == (
        "error: the environment's proxy settings (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY) cannot "
        f"be used: {EXTRA}\n"
    )
