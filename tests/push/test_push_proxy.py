"""Push deliveries behind an egress proxy: ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` (with
``NO_PROXY``) are read as the JWKS fetch reads them (docs/push.md, "Behind an egress
proxy"). A webhook they name a proxy for is checked by what the agent's host resolves (a
name it cannot resolve is the proxy's to reach), then POSTed through the proxy by its name
(``CONNECT`` for https, the certificate verified for the name); a host ``NO_PROXY`` names
gets the direct delivery, to the checked address. The agent's host resolves names on a
name server of the test's (``push_dns_servers``); the proxy resolves them from its own
table."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._forward_proxy import forward_proxy, without_proxies
from tests._support import TLS, running_server
from tests.bindings._grpc import self_signed_cert

from ._agent import GATES, Receiver, add_message, push_agent, receiver, rpc, skill_message, statuses
from ._dns import name_server


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    without_proxies(monkeypatch)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@contextlib.asynccontextmanager
async def tls_receiver(certificate: tuple[Path, Path]) -> AsyncIterator[Receiver]:
    """A :class:`Receiver` over https (a certificate for ``localhost`` and 127.0.0.1)."""
    rec = Receiver()
    cert, key = certificate
    tls = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    async with running_server(rec.app(), **tls) as base:
        rec.base = base.replace("http://", "https://")
        yield rec


def _client() -> httpx.AsyncClient:
    """The test's own client to the agent: the proxy settings are the agent's, not its."""
    return httpx.AsyncClient(timeout=30, trust_env=False, verify=TLS)


async def _send_with(client: httpx.AsyncClient, base: str, url: str) -> dict[str, Any]:
    params = {
        "message": add_message(),
        "configuration": {"taskPushNotificationConfig": {"id": "h", "url": url}},
    }
    return await rpc(client, base, "SendMessage", params)


@pytest.mark.parametrize(
    ("variable", "here"),
    [
        ("HTTP_PROXY", {}),
        ("http_proxy", {}),
        ("ALL_PROXY", {}),
        ("HTTP_PROXY", {"hook.test": ["127.0.0.1"]}),
    ],
    ids=["HTTP_PROXY", "http_proxy", "ALL_PROXY", "resolved-here"],
)
async def test_deliveries_go_through_the_environments_proxy_by_name(
    variable: str, here: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent's host resolves hook.test to loopback, or not at all (behind an egress
    # proxy it may resolve no outside name): either way the proxy is asked for the name.
    async with (
        name_server(here) as dns,
        receiver() as rec,
        forward_proxy({"hook.test": "127.0.0.1"}) as px,
    ):
        monkeypatch.setenv(variable, px.url)
        async with push_agent(push_dns_servers=[dns.address]) as (base, app), _client() as client:
            port = httpx.URL(rec.base).port
            url = f"http://hook.test:{port}/hook"
            reply = await _send_with(client, base, url)
            assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", reply
            await app.state.a2a.extras["push"].sender.idle()
            task_id = reply["result"]["task"]["id"]
            assert await statuses(client, base, task_id) == {"h": ("active", None)}
    delivered = rec.accepted("/hook")
    assert delivered and len(delivered) == len(rec.log)
    assert {d.headers["host"] for d in delivered} == {f"hook.test:{port}"}
    # One connection to the proxy carried them all (kept alive); before, one each.
    assert len(delivered) > 1 and px.asked == [f"POST {url}"]


@pytest.mark.parametrize(("name", "verified"), [("localhost", True), ("other.test", False)])
async def test_https_deliveries_go_through_a_connect_tunnel_verified_for_the_name(
    certificate: tuple[Path, Path],
    name: str,
    verified: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # other.test resolves here to 127.0.0.1, which the certificate holds, but not the
    # name: a delivery verified for the address it was aimed at would pass.
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))  # the agent trusts the test's CA
    async with (
        name_server({"other.test": ["127.0.0.1"]}) as dns,
        tls_receiver(certificate) as rec,
        forward_proxy({name: "127.0.0.1"}) as px,
    ):
        monkeypatch.setenv("HTTPS_PROXY", px.url)
        once = {"push_dns_servers": [dns.address], "push_retry_delays": ()}
        async with push_agent(**once) as (base, app), _client() as client:
            port = httpx.URL(rec.base).port
            reply = await _send_with(client, base, f"https://{name}:{port}/hook")
            assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", reply
            await app.state.a2a.extras["push"].sender.idle()
            status = await statuses(client, base, reply["result"]["task"]["id"])
    assert px.asked == [f"CONNECT {name}:{port}"]
    if verified:  # one tunnel carried every delivery (kept alive); before, one each
        assert status == {"h": ("active", None)}
        assert len(rec.log) > 1
        assert rec.log and {d.headers["host"] for d in rec.log} == {f"localhost:{port}"}
    else:
        assert status == {"h": ("failed", "connection error: ConnectError (after 1 attempts)")}
        assert rec.log == []


@pytest.mark.parametrize("no_proxy", ["hook.test", ".test", "other.example, hook.test", "*"])
async def test_a_webhook_no_proxy_names_is_delivered_directly(
    no_proxy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        name_server({"hook.test": ["127.0.0.1"]}) as dns,
        receiver() as rec,
        forward_proxy({}) as px,
    ):
        monkeypatch.setenv("HTTP_PROXY", px.url)
        monkeypatch.setenv("NO_PROXY", no_proxy)
        async with push_agent(push_dns_servers=[dns.address]) as (base, app), _client() as client:
            port = httpx.URL(rec.base).port
            reply = await _send_with(client, base, f"http://hook.test:{port}/hook")
            assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", reply
            await app.state.a2a.extras["push"].sender.idle()
    assert px.asked == []
    assert rec.accepted("/hook") and {d.headers["host"] for d in rec.log} == {f"hook.test:{port}"}


#: What the agent's host resolves in the refusal cases.
_HERE = {"meta.test": ["169.254.169.254"], "inside.test": ["10.1.2.3"], "me.test": ["127.0.0.1"]}


@pytest.mark.parametrize("no_proxy", ["", "*"], ids=["proxied", "direct"])
@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://127.0.0.1/h", "loopback address (127.0.0.1)"),
        ("https://[::ffff:127.0.0.1]/h", "loopback address (127.0.0.1)"),
        ("https://169.254.169.254/latest/", "cloud metadata service address (169.254.169.254)"),
        ("https://meta.test/latest/", "host 'meta.test' resolves to a non-public address"),
        ("https://inside.test/h", "host 'inside.test' resolves to a non-public address"),
        ("https://me.test/h", "host 'me.test' resolves to a non-public address"),
        ("http://hook.test/h", "only https URLs are allowed"),
    ],
)
async def test_a_webhook_at_a_non_public_address_is_refused_before_the_proxy_sees_it(
    url: str, reason: str, no_proxy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with name_server(_HERE) as dns, forward_proxy({}) as px:
        monkeypatch.setenv("ALL_PROXY", px.url)
        monkeypatch.setenv("NO_PROXY", no_proxy)
        secure = {"push_allow_insecure_urls": False, "push_dns_servers": [dns.address]}
        async with push_agent(**secure) as (base, _app), _client() as client:
            reply = await _send_with(client, base, url)
    error = reply["error"]
    assert (error["code"], error["message"]) == (-32602, f"Invalid push notification URL: {reason}")
    assert px.asked == []


async def _gated_task(client: httpx.AsyncClient, base: str, n: int) -> str:
    """A task that stays working until ``GATES[n]`` opens: nothing is delivered yet."""
    GATES[n] = asyncio.Event()
    params = {
        "message": skill_message("demo.gate", n),
        "configuration": {"returnImmediately": True},
    }
    return str((await rpc(client, base, "SendMessage", params))["result"]["task"]["id"])


async def _until_failed(client: httpx.AsyncClient, base: str, task_id: str) -> tuple[str, Any]:
    """The status of the task's config ``h`` once its delivery gave up."""
    async with asyncio.timeout(60):  # a hang guard
        while (status := (await statuses(client, base, task_id))["h"])[0] != "failed":
            await asyncio.sleep(0.02)
    return status


@pytest.mark.parametrize(
    ("no_proxy", "accepted"), [("", True), ("far.test", False)], ids=["proxied", "direct"]
)
async def test_a_name_only_the_proxy_can_reach_is_accepted_where_it_goes_through_it(
    no_proxy: str, accepted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent's host resolves no name; the proxy sends far.test to a closed port.
    async with name_server({}) as dns, forward_proxy({"far.test": "127.0.0.1"}) as px:
        monkeypatch.setenv("HTTPS_PROXY", px.url)
        monkeypatch.setenv("NO_PROXY", no_proxy)
        secure = {
            "push_allow_insecure_urls": False,
            "push_dns_servers": [dns.address],
            "push_retry_delays": (),
        }
        async with push_agent(**secure) as (base, _app), _client() as client:
            n = 901 if accepted else 902
            task_id = await _gated_task(client, base, n)
            hook = {"taskId": task_id, "id": "h", "url": "https://far.test/hook"}
            reply = await rpc(client, base, "CreateTaskPushNotificationConfig", hook)
            GATES[n].set()
            if accepted:
                status = await _until_failed(client, base, task_id)
    if accepted:
        assert reply["result"]["url"] == "https://far.test/hook", reply
        assert status == ("failed", "connection error: ProxyError (after 1 attempts)")
        assert px.asked == ["CONNECT far.test:443"]
    else:
        error = reply["error"]
        refused = "Invalid push notification URL: host 'far.test' could not be resolved"
        assert (error["code"], error["message"]) == (-32602, refused)
        assert px.asked == []


async def test_a_name_that_turns_non_public_is_refused_at_delivery_before_the_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Registered while the agent's host resolved it nowhere (the proxy's to reach), the
    # name then resolves here to a private address: the delivery is refused, unsent.
    async with name_server({}) as dns, forward_proxy({}) as px:
        monkeypatch.setenv("HTTPS_PROXY", px.url)
        secure = {"push_allow_insecure_urls": False, "push_dns_servers": [dns.address]}
        async with push_agent(**secure) as (base, _app), _client() as client:
            task_id = await _gated_task(client, base, 903)
            hook = {"taskId": task_id, "id": "h", "url": "https://rebind.test/hook"}
            assert "result" in await rpc(client, base, "CreateTaskPushNotificationConfig", hook)
            dns.table["rebind.test"] = ["10.0.0.7"]
            GATES[903].set()
            status = await _until_failed(client, base, task_id)
    refused = "URL refused at delivery: host 'rebind.test' resolves to a non-public address"
    assert status == ("failed", refused)
    assert px.asked == []


@pytest.mark.parametrize(
    ("proxy", "reason"),
    [
        ("ftp://127.0.0.1:9", "httpx takes http, https, socks5 and socks5h proxies"),
        (
            "socks5://user:pw-4242@127.0.0.1:9",
            "a socks5 proxy needs the socksio package: pip install httpx[socks]",
        ),
    ],
    ids=["unknown-scheme", "socks5-without-socksio"],
)
async def test_a_proxy_httpx_cannot_use_fails_the_deliveries_it_applies_to(
    proxy: str, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent starts and serves; each delivery the proxy applies to is given up on with
    # a reason of its own (was: the agent's start failed, as httpx read the setting), which
    # names the proxy without its password (was "ValueError", whatever the cause).
    monkeypatch.setitem(sys.modules, "socksio", None)  # not installed, whatever this venv has
    monkeypatch.setenv("HTTP_PROXY", proxy)
    async with (
        name_server({}) as dns,
        push_agent(push_dns_servers=[dns.address]) as (base, _app),
        _client() as client,
    ):
        task_id = await _gated_task(client, base, 904)
        hook = {"taskId": task_id, "id": "h", "url": "http://hook.test/hook"}
        assert "result" in await rpc(client, base, "CreateTaskPushNotificationConfig", hook)
        GATES[904].set()
        status = await _until_failed(client, base, task_id)
    shown = proxy.replace("pw-4242", "***")
    assert status == (
        "failed",
        f"request cannot be sent: the proxy {shown} cannot be used: {reason}",
    )


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_a_webhook_at_an_ipv6_literal_is_named_in_brackets_to_the_proxy(
    scheme: str, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # httpcore wrote "CONNECT ::1:PORT" (and "POST http://::1:PORT/hook"): which colon
    # starts the port, a proxy cannot tell; this one refuses it (400), as strict ones do.
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))  # the agent trusts the test's CA
    secure = scheme == "https"
    async with (
        name_server({}) as dns,
        tls_receiver(certificate) if secure else receiver() as rec,
        forward_proxy({"::1": "127.0.0.1"}) as px,
    ):
        monkeypatch.setenv(f"{scheme.upper()}_PROXY", px.url)
        once = {"push_dns_servers": [dns.address], "push_retry_delays": ()}
        async with push_agent(**once) as (base, app), _client() as client:
            port = httpx.URL(rec.base).port
            url = f"{scheme}://[::1]:{port}/hook"
            reply = await _send_with(client, base, url)
            assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", reply
            await app.state.a2a.extras["push"].sender.idle()
            status = await statuses(client, base, reply["result"]["task"]["id"])
    assert status == {"h": ("active", None)}
    asked = f"CONNECT [::1]:{port}" if secure else f"POST {url}"
    assert px.asked and set(px.asked) == {asked}
    assert rec.log and {d.headers["host"] for d in rec.log} == {f"[::1]:{port}"}
