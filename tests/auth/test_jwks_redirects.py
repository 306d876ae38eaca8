"""Where a key set's fetch may be led: redirects are followed (identity providers move
their key sets), but never from https to http, nor to an address more private than the
configured URL's (an in-cluster identity provider may be private; a redirect *away* from it
is what an attacker steers), and every request goes to the address its name was resolved
to and checked, once (no second lookup for a rebinding DNS answer to change), with the
certificate still verified for the name."""

from __future__ import annotations

import json
import ssl
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from apcore_a2a.auth.jwks import JWKSKeySource, KeyLookupError
from tests._forward_proxy import without_proxies
from tests._support import running_server
from tests.bindings._grpc import self_signed_cert

from .keys import rsa_pair

KEY = rsa_pair("real")
BODY = json.dumps({"keys": [KEY.jwk()]}).encode()
#: a global address, only ever handed to a MockTransport: nothing is sent to it
PUBLIC = "93.184.215.14"


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    without_proxies(monkeypatch)


class Names:
    """A resolver of fixed answers (a list of answers: one per lookup, the last repeated),
    counting lookups by name."""

    def __init__(self, **answers: list[str] | list[list[str]]) -> None:
        self.answers = {name.replace("_", "."): value for name, value in answers.items()}
        self.lookups: dict[str, int] = {}

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        count = self.lookups[host] = self.lookups.get(host, 0) + 1
        answer = self.answers.get(host)
        if answer is None:
            raise OSError(f"no such name: {host}")
        if answer and isinstance(answer[0], list):
            return answer[min(count, len(answer)) - 1]  # type: ignore[return-value]
        return answer  # type: ignore[return-value]


class Idp:
    """A key set at ``/jwks.json`` and ``/old`` redirecting to :attr:`target`, recording
    the ``Host`` of each request."""

    def __init__(self, target: str = "") -> None:
        self.target = target
        self.hosts: list[str] = []

    def app(self) -> Starlette:
        async def jwks(request: Request) -> Response:
            self.hosts.append(request.headers["host"])
            return JSONResponse(json.loads(BODY))

        async def old(request: Request) -> Response:
            self.hosts.append(request.headers["host"])
            return RedirectResponse(self.target, status_code=302)

        return Starlette(routes=[Route("/jwks.json", jwks), Route("/old", old)])


def mock(seen: list[str], target: str) -> httpx.MockTransport:
    """Stands where requests would leave the machine: ``/old`` redirects to *target*,
    anything else is the key set; every URL asked for is recorded (nothing is sent)."""

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.url} (Host: {request.headers['host']})")
        if request.url.path == "/old":
            return httpx.Response(302, headers={"Location": target})
        return httpx.Response(200, content=BODY)

    return httpx.MockTransport(answer)


async def test_a_redirect_on_this_host_from_a_loopback_url_is_followed() -> None:
    idp = Idp()
    async with running_server(idp.app()) as base:
        port = base.rsplit(":", 1)[1]
        # localhost may be ::1 first, where nothing listens: its next address is tried.
        idp.target = f"http://localhost:{port}/jwks.json"
        source = JWKSKeySource(base + "/old")
        assert (await source.get("real", "RS256")) is not None
    assert idp.hosts == [f"127.0.0.1:{port}", f"localhost:{port}"]


@pytest.mark.parametrize(
    ("configured", "target", "refused"),
    [
        (
            PUBLIC,
            "http://10.1.2.3/jwks.json",
            "private address (10.1.2.3; the JWKS URL's are public)",
        ),
        (PUBLIC, "http://[fd00::7]/jwks.json", "private address (fd00::7"),
        (PUBLIC, "http://inside.test/jwks.json", "private address (192.168.1.9"),
        (PUBLIC, "http://mixed.test/jwks.json", "private address (10.0.0.1"),
        # not public unicast, which Python 3.11's is_global called public: the local-use
        # NAT64 prefix (RFC 8215: an operator's own layout, to its own IPv4 network),
        # site-local (fec0::/10, deprecated, still routed inside some networks), multicast
        (PUBLIC, "http://[64:ff9b:1::a00:5]/jwks.json", "private address (64:ff9b:1::a00:5"),
        (PUBLIC, "http://[fec0::5]/jwks.json", "private address (fec0::5"),
        (PUBLIC, "http://239.1.2.3/jwks.json", "private address (239.1.2.3"),
        ("10.0.0.5", "http://127.0.0.1/jwks.json", "loopback address (127.0.0.1"),
        ("10.0.0.5", "http://localhost/jwks.json", "loopback address (::1"),
        ("10.0.0.5", "http://0.0.0.0/jwks.json", "loopback address (0.0.0.0"),
        ("10.0.0.5", "http://[::ffff:127.0.0.1]/jwks.json", "loopback address (::ffff:7f00:1"),
        ("10.0.0.5", "http://[64:ff9b::7f00:1]/jwks.json", "loopback address (64:ff9b::7f00:1"),
        ("10.0.0.5", "http://169.254.169.254/latest/meta-data/", "link-local address"),
        ("10.0.0.5", "http://[fd00:ec2::254]/latest/meta-data/", "link-local address"),
        ("10.0.0.5", "http://100.100.100.200/latest/meta-data/", "link-local address"),
        ("127.0.0.1", "http://169.254.169.254/latest/meta-data/", "link-local address"),
        ("127.0.0.1", "http://[fe80::1]/k", "link-local address (fe80::1"),
        ("127.0.0.1", "http://[::ffff:169.254.169.254]/k", "link-local address"),
        ("127.0.0.1", "http://meta.test/k", "link-local address (169.254.169.254"),
        # an IPv4 address with a "zone" is a name (which a resolver may answer), not 10.0.0.6
        ("10.0.0.5", "http://10.0.0.6%.meta.test/k", "link-local address (169.254.169.254"),
    ],
)
async def test_a_redirect_further_in_than_the_configured_url_is_refused(
    configured: str, target: str, refused: str, caplog: pytest.LogCaptureFixture
) -> None:
    names = Names(
        idp_test=[configured],
        inside_test=["192.168.1.9"],
        mixed_test=[PUBLIC, "10.0.0.1"],
        localhost=["::1", "127.0.0.1"],
        meta_test=["169.254.169.254"],
        **{"10.0.0.6%.meta.test": ["169.254.169.254"]},
    )
    seen: list[str] = []
    source = JWKSKeySource("http://idp.test/old", transport=mock(seen, target), resolver=names)
    with pytest.raises(KeyLookupError, match="fetch failed"):
        await source.get("real", "RS256")
    assert seen == [f"http://{configured}/old (Host: idp.test)"]
    assert f"refused a redirect to a {refused}" in caplog.text


@pytest.mark.parametrize(
    "target",
    ["http://127.0.0.1/k", "http://[::1]/k", "http://0.0.0.0/k", "http://[::ffff:127.0.0.1]/k"],
)
async def test_a_redirect_from_a_private_address_to_this_host_is_refused(target: str) -> None:
    # An in-cluster identity provider's redirect must not reach what listens on the agent's
    # own host (its database, its admin port): no name is looked up here at all.
    seen: list[str] = []
    source = JWKSKeySource("http://10.0.0.5/old", transport=mock(seen, target))
    with pytest.raises(KeyLookupError, match="fetch failed"):
        await source.get("real", "RS256")
    assert seen == ["http://10.0.0.5/old (Host: 10.0.0.5)"]


@pytest.mark.parametrize(
    ("configured", "target", "sent"),
    [
        (PUBLIC, "http://keys.test/jwks.json", f"http://{PUBLIC}/jwks.json (Host: keys.test)"),
        ("10.0.0.5", "http://192.168.1.9/jwks.json", "http://192.168.1.9/jwks.json"),
        ("10.0.0.5", "http://keys.test/jwks.json", f"http://{PUBLIC}/jwks.json (Host: keys.test)"),
        # a zone counts on link-local only: sent to the address checked, no resolver asked
        ("10.0.0.5", "http://[::ffff:10.0.0.6%25.meta.test]/k", "http://[::ffff:a00:6]/k"),
    ],
)
async def test_a_redirect_as_public_as_the_configured_url_or_more_is_followed(
    configured: str, target: str, sent: str
) -> None:
    names = Names(idp_test=[configured], keys_test=[PUBLIC])
    seen: list[str] = []
    source = JWKSKeySource("http://idp.test/old", transport=mock(seen, target), resolver=names)
    assert (await source.get("real", "RS256")) is not None
    assert seen[0] == f"http://{configured}/old (Host: idp.test)"
    assert seen[1].startswith(sent)


async def test_the_address_checked_is_the_address_connected_to() -> None:
    # A rebinding name answers a harmless address to the check and another to a second
    # lookup: there is none, the connection goes to the first answer.
    idp = Idp()
    async with running_server(idp.app()) as base:
        port = base.rsplit(":", 1)[1]
        idp.target = f"http://keys.test:{port}/jwks.json"
        names = Names(idp_test=["127.0.0.1"], keys_test=[["127.0.0.1"], ["127.0.0.3"]])
        source = JWKSKeySource(f"http://idp.test:{port}/old", resolver=names)
        assert (await source.get("real", "RS256")) is not None
    assert names.lookups == {"idp.test": 1, "keys.test": 1}
    assert idp.hosts == [f"idp.test:{port}", f"keys.test:{port}"]


@pytest.mark.parametrize("first", ["http", "https"])
@pytest.mark.parametrize("target", ["http://keys.test/jwks.json", "http://idp.test/jwks.json"])
async def test_a_redirect_from_https_to_http_is_not_followed(first: str, target: str) -> None:
    # The key set decides whose tokens are accepted: fetched over https, it must not be
    # read from a plain-http answer a redirect points to (an on-path attacker writes it).
    names = Names(idp_test=[PUBLIC], keys_test=[PUBLIC])
    seen: list[str] = []
    source = JWKSKeySource(f"{first}://idp.test/old", transport=mock(seen, target), resolver=names)
    if first == "http":
        assert (await source.get("real", "RS256")) is not None
        return
    with pytest.raises(KeyLookupError, match="fetch failed"):
        await source.get("real", "RS256")
    assert seen == [f"https://{PUBLIC}/old (Host: idp.test)"]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.mark.parametrize(("name", "verified"), [("localhost", True), ("other.test", False)])
async def test_tls_names_are_verified_though_the_connection_goes_to_an_address(
    certificate: tuple[Path, Path], name: str, verified: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # The certificate names localhost and 127.0.0.1: verified against the address, a name
    # it does not hold would pass. It is verified against the name.
    cert, key = certificate
    trusting = httpx.AsyncHTTPTransport(verify=ssl.create_default_context(cafile=str(cert)))
    idp = Idp()
    names = Names(localhost=["127.0.0.1"], other_test=["127.0.0.1"])
    async with running_server(idp.app(), ssl_certfile=str(cert), ssl_keyfile=str(key)) as base:
        port = base.rsplit(":", 1)[1]
        url = f"https://{name}:{port}/jwks.json"
        source = JWKSKeySource(url, transport=trusting, resolver=names)
        if verified:
            assert (await source.get("real", "RS256")) is not None
            assert idp.hosts == [f"localhost:{port}"]
        else:
            with pytest.raises(KeyLookupError, match="fetch failed"):
                await source.get("real", "RS256")
            assert idp.hosts == []
            assert "certificate verify failed" in caplog.text
            assert "other.test" in caplog.text  # the name, not the address
