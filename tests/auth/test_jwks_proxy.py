"""A key set behind an egress proxy: ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` (with
``NO_PROXY``) are honoured as httpx reads them. The proxy resolves the names it is asked
for, so nothing can be pinned there; what is still checked is the class of what the agent
can see: a literal address, and a name's addresses when the agent's host resolves it (one
that does not resolve here is the proxy's to reach). A host ``NO_PROXY`` names is fetched on
the direct path, pinned and checked as before."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from apcore_a2a.auth.jwks import JWKSKeySource, KeyLookupError
from tests._forward_proxy import forward_proxy, without_proxies
from tests._support import running_server
from tests.bindings._grpc import self_signed_cert

from .test_jwks_redirects import Idp, Names, mock


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    without_proxies(monkeypatch)


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
async def test_the_key_set_is_fetched_through_the_environments_proxy(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent's host resolves no outside name; only the proxy knows where idp.test is.
    idp = Idp()
    names = Names()
    async with running_server(idp.app()) as base, forward_proxy({"idp.test": "127.0.0.1"}) as px:
        port = base.rsplit(":", 1)[1]
        monkeypatch.setenv(variable, px.url)
        source = JWKSKeySource(f"http://idp.test:{port}/jwks.json", resolver=names)
        assert (await source.get("real", "RS256")) is not None
    assert px.asked == [f"GET http://idp.test:{port}/jwks.json"]
    assert idp.hosts == [f"idp.test:{port}"]
    assert names.lookups == {"idp.test": 1}  # the class check's lookup, not the connection's


async def test_a_socks5_proxy_without_socksio_is_logged_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A refusal in our words, the proxy's password masked (was httpx's ImportError).
    monkeypatch.setitem(sys.modules, "socksio", None)  # not installed, whatever this venv has
    monkeypatch.setenv("ALL_PROXY", "socks5://user:pw-4242@127.0.0.1:9")
    source = JWKSKeySource("http://idp.test/jwks.json", resolver=Names())
    with caplog.at_level(logging.WARNING, logger="apcore_a2a"), pytest.raises(KeyLookupError):
        await source.get("real", "RS256")
    assert (
        "JWKS fetch from http://idp.test/jwks.json failed (ProxyUnusable: the proxy "
        "socks5://user:***@127.0.0.1:9 cannot be used: a socks5 proxy needs the socksio "
        "package: pip install httpx[socks])"
    ) in caplog.text
    assert "4242" not in caplog.text


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.mark.parametrize(("name", "verified"), [("localhost", True), ("other.test", False)])
async def test_https_goes_through_a_connect_tunnel_and_the_name_is_still_verified(
    certificate: tuple[Path, Path],
    name: str,
    verified: bool,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cert, key = certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the agent trusts the test's CA
    idp = Idp()
    tls = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    async with (
        running_server(idp.app(), **tls) as base,
        forward_proxy({name: "127.0.0.1"}) as px,
    ):
        port = base.rsplit(":", 1)[1]
        monkeypatch.setenv("HTTPS_PROXY", px.url)
        source = JWKSKeySource(f"https://{name}:{port}/jwks.json", resolver=Names())
        if verified:
            assert (await source.get("real", "RS256")) is not None
            assert idp.hosts == [f"localhost:{port}"]
        else:
            with pytest.raises(KeyLookupError, match="fetch failed"):
                await source.get("real", "RS256")
            assert idp.hosts == []
            assert "certificate verify failed" in caplog.text
    assert px.asked == [f"CONNECT {name}:{port}"]


@pytest.mark.parametrize("no_proxy", ["idp.test", ".test", "other.example,idp.test", "*"])
async def test_a_host_no_proxy_names_is_fetched_directly(
    no_proxy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    idp = Idp()
    names = Names(idp_test=["127.0.0.1"])
    async with running_server(idp.app()) as base, forward_proxy({}) as px:
        port = base.rsplit(":", 1)[1]
        monkeypatch.setenv("HTTP_PROXY", px.url)
        monkeypatch.setenv("NO_PROXY", no_proxy)
        source = JWKSKeySource(f"http://idp.test:{port}/jwks.json", resolver=names)
        assert (await source.get("real", "RS256")) is not None
    assert px.asked == []
    assert idp.hosts == [f"idp.test:{port}"]
    assert names.lookups == {"idp.test": 1}


@pytest.mark.parametrize(
    ("configured", "target", "refused"),
    [
        ("idp.test", "http://127.0.0.1:{port}/jwks.json", "loopback address (127.0.0.1"),
        ("idp.test", "http://[::ffff:127.0.0.1]/k", "loopback address (::ffff:7f00:1"),
        ("idp.test", "http://169.254.169.254/latest/meta-data/", "link-local address"),
        ("idp.test", "http://meta.test/latest/", "link-local address (169.254.169.254"),
        ("idp.test", "http://localhost:{port}/jwks.json", "loopback address (127.0.0.1"),
        ("far.test", "http://10.1.2.3/k", "private address (10.1.2.3; the JWKS URL's are public"),
        ("far.test", "http://inside.test/k", "private address (192.168.1.9"),
        ("idp.test", "http://keys.test:{port}/jwks.json", None),
        ("idp.test", "http://10.9.9.9:{port}/jwks.json", None),
    ],
)
async def test_a_proxied_redirect_is_classed_by_what_this_host_sees(
    configured: str,
    target: str,
    refused: str | None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The configured idp.test is private here (10.0.0.5); far.test and keys.test resolve
    # nowhere here: far.test's class is taken as public, keys.test is the proxy's to reach.
    # The proxy sends every host to the one local IdP.
    idp = Idp()
    names = Names(
        idp_test=["10.0.0.5"],
        meta_test=["169.254.169.254"],
        localhost=["127.0.0.1"],
        inside_test=["192.168.1.9"],
    )
    async with running_server(idp.app()) as base:
        port = base.rsplit(":", 1)[1]
        everywhere = dict.fromkeys(["idp.test", "far.test", "keys.test", "10.9.9.9"], "127.0.0.1")
        async with forward_proxy(everywhere) as px:
            monkeypatch.setenv("HTTP_PROXY", px.url)
            idp.target = target.format(port=port)
            source = JWKSKeySource(f"http://{configured}:{port}/old", resolver=names)
            if refused is None:
                assert (await source.get("real", "RS256")) is not None
            else:
                with pytest.raises(KeyLookupError, match="fetch failed"):
                    await source.get("real", "RS256")
    first = f"GET http://{configured}:{port}/old"
    if refused is None:
        assert px.asked == [first, f"GET {idp.target}"]
    else:
        assert px.asked == [first]  # the refused redirect never reached the proxy
        assert f"refused a redirect to a {refused}" in caplog.text


@pytest.mark.parametrize(
    ("target", "logged"),
    [
        ("http://127.0.0.1/k", "refused a redirect to a loopback address"),
        ("http://other.test/k", "ConnectError"),
    ],
)
async def test_under_no_proxy_the_redirect_checks_and_pinning_hold(
    target: str, logged: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # NO_PROXY sends idp.test and 127.0.0.1 directly: to the checked address, pinned, and a
    # redirect to loopback from a private URL is refused; a host NO_PROXY does not name
    # goes to the proxy (nothing listens there: the fetch fails to connect).
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "idp.test,127.0.0.1")
    seen: list[str] = []
    names = Names(idp_test=["10.0.0.5"], other_test=["93.184.215.14"])
    source = JWKSKeySource("http://idp.test/old", transport=mock(seen, target), resolver=names)
    with pytest.raises(KeyLookupError, match="fetch failed"):
        await source.get("real", "RS256")
    assert seen == ["http://10.0.0.5/old (Host: idp.test)"]
    assert logged in caplog.text


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_a_key_set_at_an_ipv6_literal_is_named_in_brackets_to_the_proxy(
    scheme: str, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # httpcore wrote "CONNECT ::1:PORT" and "GET http://::1:PORT/jwks.json": which colon
    # starts the port, a proxy cannot tell; this one refuses it (400), as strict ones do.
    cert, key = certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the agent trusts the test's CA
    idp = Idp()
    tls = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)} if scheme == "https" else {}
    async with running_server(idp.app(), **tls) as base, forward_proxy({"::1": "127.0.0.1"}) as px:
        port = base.rsplit(":", 1)[1]
        monkeypatch.setenv(f"{scheme.upper()}_PROXY", px.url)
        url = f"{scheme}://[::1]:{port}/jwks.json"
        source = JWKSKeySource(url, resolver=Names())
        assert (await source.get("real", "RS256")) is not None
    assert px.asked == [f"CONNECT [::1]:{port}" if scheme == "https" else f"GET {url}"]
    assert idp.hosts == [f"[::1]:{port}"]
