"""Which egress proxy the environment names for a URL, by httpx's own rule for
``trust_env`` (``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``, any case, ``NO_PROXY``
exempting hosts), and its transport, built only for a URL that goes through it: a proxy
that no request goes through is never judged (a ``socks5://`` one without ``socksio``
refused no call it would not carry). Shared by the client, the JWKS fetch and push
deliveries (``_egress.py``).

Example: with ``HTTPS_PROXY=proxy:3128`` and ``NO_PROXY=.internal``,
``proxy_for(httpx.URL("https://hooks.example.com/a"))`` is ``"http://proxy:3128"`` and
``proxy_for(httpx.URL("https://a.internal/"))`` is ``None``.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import ssl
import urllib.request
from collections.abc import Mapping

import httpx

from apcore_a2a._text import hide_url_secrets

#: Connections kept idle at most 4 s: below the 5 s keep-alive of uvicorn's and Node's
#: servers, so a request never goes out on a connection its server is closing (httpx's 5 s
#: met that close about once in a hundred pauses of that length: ``ReadError``).
KEPT = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=4.0)
#: What a proxy URL of the socks5 scheme needs, named in refusals.
SOCKS_EXTRA = "a socks5 proxy needs the socksio package: pip install httpx[socks]"


def trusted_context() -> ssl.SSLContext:
    """The verifying TLS context httpx builds for ``trust_env`` (the CAs of
    ``SSL_CERT_FILE``, else ``SSL_CERT_DIR``, else certifi's bundle), built once per value
    of those variables and modification time of what they name (a replaced bundle is read
    again) and shared: loading a bundle costs about 30 ms of CPU, which every client, JWKS
    fetcher and push sender paid when built. Every transport given it speaks HTTP/1.1
    (httpcore sets each connection's ALPN on the context)."""
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    watched = cafile or capath
    try:
        changed = os.stat(watched).st_mtime_ns if watched else 0
    except OSError:
        changed = -1  # httpx's load names what is missing, and nothing is kept
    return _context(cafile, capath, changed, os.environ.get("SSLKEYLOGFILE"))


@functools.lru_cache(maxsize=8)
def _context(*_key: object) -> ssl.SSLContext:
    return httpx.create_ssl_context()  # reads the variables of the key


class ProxyUnusable(ValueError):
    """A proxy the environment names that httpx cannot use: a ``socks5://`` one without
    the ``socksio`` package (httpx raises ``ImportError``), or a scheme it does not know.
    No retry sends the request; the message names the proxy without its credentials,
    *reason* says why alone."""

    def __init__(self, proxy: str, reason: str) -> None:
        super().__init__(f"the proxy {hide_url_secrets(proxy)} cannot be used: {reason}")
        self.reason = reason


def proxy_transport(
    proxy: str, verify: ssl.SSLContext | bool, limits: httpx.Limits = KEPT
) -> httpx.AsyncHTTPTransport:
    """httpx's transport through *proxy* (its connections key by the URL's name and port,
    as the proxy resolves the name) within *limits*, or :class:`ProxyUnusable` saying why
    not."""
    try:
        return httpx.AsyncHTTPTransport(proxy=proxy, verify=verify, limits=limits)
    except ImportError:
        reason = SOCKS_EXTRA
    except ValueError:  # httpx's words quote the URL
        reason = "httpx takes http, https, socks5 and socks5h proxies"
    raise ProxyUnusable(proxy, reason)


def proxy_for(
    url: httpx.URL, proxies: Mapping[str, str] | None = None, *, strict: bool = False
) -> str | None:
    """The URL of the proxy *url* goes through, as an ``httpx.AsyncClient`` with
    ``trust_env`` chooses it from *proxies* (``urllib.request.getproxies()``, read now
    when not given): the most specific of its mount patterns that matches (a ``NO_PROXY``
    host before the scheme's proxy, before ``all``'s), ``None`` for none or a ``NO_PROXY``
    one, for every host with ``*``. A proxy given without a scheme is an http one.
    A ``NO_PROXY`` entry httpx cannot read (``[::1]``, an IPv6 network) matches nothing;
    with *strict*, it is ``httpx.InvalidURL``, as httpx's client refuses it."""
    if proxies is None:
        proxies = urllib.request.getproxies()
    mounts: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if proxy := proxies.get(scheme):
            mounts[f"{scheme}://"] = proxy if "://" in proxy else f"http://{proxy}"
    for entry in (e.strip() for e in proxies.get("no", "").split(",")):
        if entry == "*":
            return None
        if entry:
            mounts[_exempting(entry)] = None
    chosen: tuple[tuple[int, int, int], str | None] | None = None
    for key, proxy in mounts.items():
        try:
            rank = _rank(key, url)
        except httpx.InvalidURL:
            if strict:
                raise
            continue
        if rank is not None and (chosen is None or rank < chosen[0]):
            chosen = rank, proxy  # the first of equal rank, as httpx's stable sort
    return None if chosen is None else chosen[1]


def _exempting(entry: str) -> str:
    """httpx's mount pattern for a ``NO_PROXY`` *entry* (curl's reading of it)."""
    if "://" in entry:
        return entry
    for kind, form in ((ipaddress.IPv4Address, "{}"), (ipaddress.IPv6Address, "[{}]")):
        try:
            kind(entry.split("/")[0])
        except ValueError:
            continue
        return "all://" + form.format(entry)
    return f"all://{entry}" if entry.lower() == "localhost" else f"all://*{entry}"


def _rank(pattern: str, url: httpx.URL) -> tuple[int, int, int] | None:
    """How specific the mount *pattern* is when it matches *url* (lower first; httpx's
    order: with a port, then the longer host, then the longer scheme), else ``None``."""
    if ":" not in pattern:
        raise httpx.InvalidURL(f"no scheme: {pattern}")
    parsed = httpx.URL(pattern)
    scheme = "" if parsed.scheme == "all" else parsed.scheme
    host = "" if parsed.host == "*" else parsed.host
    if scheme and scheme != url.scheme:
        return None
    if host.startswith("*."):  # subdomains only
        matches = bool(re.fullmatch(f".+\\.{re.escape(host[2:])}", url.host))
    elif host.startswith("*"):  # the domain and its subdomains
        matches = bool(re.fullmatch(f"(.+\\.)?{re.escape(host[1:])}", url.host))
    else:
        matches = not host or host == url.host
    if not matches or (parsed.port is not None and parsed.port != url.port):
        return None
    return (0 if parsed.port is not None else 1, -len(host), -len(scheme))
