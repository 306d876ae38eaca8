"""``_proxies.proxy_for`` chooses the proxy a URL goes through as httpx's client does with
``trust_env`` (the reference: ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` and ``NO_PROXY``
as httpx reads them): for each setting and URL of a table, the same proxy, none, or the
same refusal of a ``NO_PROXY`` entry httpx cannot read. A tripwire too: it fails the day
httpx reads the environment otherwise."""

from __future__ import annotations

import itertools
import urllib.request

import httpx
import pytest

from apcore_a2a._proxies import proxy_for
from tests._forward_proxy import without_proxies

PROXIES = {
    "HTTP_PROXY": "http://p-http:1",
    "HTTPS_PROXY": "p-https:2",
    "ALL_PROXY": "http://p-all:3",
}
NO_PROXY = [
    *("", "*", "idp.test", ".test", "test", "*.test", "IDP.Test", "other.example, idp.test"),
    *("idp.test:8443", "http://idp.test", "https://", "localhost", "127.0.0.1", "::1"),
    *("10.0.0.0/8", "[::1]", "2001:db8::/32", "a.idp.test,*"),
]
URLS = [
    *("http://idp.test/", "https://idp.test:8443/k", "https://idp.test/k", "http://a.idp.test"),
    *("http://test/", "https://notidp.test/", "http://localhost:8000/", "http://127.0.0.1/"),
    *("http://[::1]:8080/", "http://10.0.0.1/", "http://10.0.0.0/", "https://other.example/"),
]
SETS = [("HTTP_PROXY",), ("HTTPS_PROXY",), ("ALL_PROXY",), tuple(PROXIES)]


def httpx_choices(urls: list[str]) -> list[str | None] | None:
    """The proxy httpx's own client sends each of *urls* through (by its private mount
    table); ``None`` when httpx cannot read the settings."""
    try:
        client = httpx.Client(trust_env=True, verify=False)
    except httpx.InvalidURL:
        return None
    with client:
        proxies = httpx._utils.get_environment_proxies()
        chosen: list[str | None] = []
        for url in urls:
            transport = client._transport_for_url(httpx.URL(url))
            mounted = [p.pattern for p, t in client._mounts.items() if t is transport]
            chosen.append(proxies[mounted[0]] if mounted else None)
        return chosen


@pytest.mark.parametrize(("names", "no_proxy"), list(itertools.product(SETS, NO_PROXY)))
def test_the_proxy_chosen_is_httpx_s(
    names: tuple[str, ...], no_proxy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_proxies(monkeypatch)
    for name in names:
        monkeypatch.setenv(name, PROXIES[name])
    monkeypatch.setenv("NO_PROXY", no_proxy)
    proxies = urllib.request.getproxies()
    expected = httpx_choices(URLS)
    if expected is None:
        for url in URLS:
            with pytest.raises(httpx.InvalidURL):
                proxy_for(httpx.URL(url), proxies, strict=True)
        return
    assert [proxy_for(httpx.URL(url), proxies, strict=True) for url in URLS] == expected
    assert [proxy_for(httpx.URL(url), proxies) for url in URLS] == expected


#: (NO_PROXY, URL, exempt): an entry with a port exempts only URLs that spell that port,
#: and httpx drops a scheme's default one (``https://example.com:443`` is port None), so
#: ``example.com:443`` exempts no https URL of example.com; ``example.com`` (no port)
#: exempts it on every port, and its subdomains (docs/client.md).
DEFAULT_PORT = [
    ("example.com:443", "https://example.com/", False),
    ("example.com:443", "https://example.com:443/", False),
    ("example.com:443", "https://api.example.com/", False),
    ("example.com", "https://example.com/", True),
    ("example.com", "https://example.com:443/", True),
    ("example.com", "https://example.com:8443/", True),
    ("example.com", "https://api.example.com/", True),
    ("example.com", "https://badexample.com/", False),
    ("example.com:8443", "https://example.com:8443/", True),
    ("example.com:8443", "https://example.com/", False),
]


@pytest.mark.parametrize(("no_proxy", "url", "exempt"), DEFAULT_PORT)
def test_no_proxy_with_the_default_port_exempts_nothing(
    no_proxy: str, url: str, exempt: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What docs/client.md says of ``NO_PROXY=example.com:443``: httpx's client and ours
    alike (a tripwire: it fails the day httpx reads a default port otherwise)."""
    without_proxies(monkeypatch)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.test:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    expected = None if exempt else "http://proxy.test:3128"
    assert httpx_choices([url]) == [expected]
    assert proxy_for(httpx.URL(url), urllib.request.getproxies(), strict=True) == expected
