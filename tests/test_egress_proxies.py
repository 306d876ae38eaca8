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
