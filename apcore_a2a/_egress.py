"""Where a request of the agent's to a URL it was given goes: through the egress proxy the
environment names (``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``, any case, ``NO_PROXY``
exempting hosts, read as httpx reads them with ``trust_env``), by the URL's name; else to
the addresses its name was checked to have, never to a second lookup (DNS rebinding).
Shared by the JWKS fetch (``auth/jwks.py``) and push deliveries (``push/policy.py``,
``push/aimed.py``): each checks a URL's addresses first; httpx's own proxy choice would see
only the address a request was aimed at.

Example: with ``HTTPS_PROXY=proxy:3128`` and ``NO_PROXY=.internal``,
``proxy_for(httpx.URL("https://hooks.example.com/a"))`` is ``"http://proxy:3128"`` and
``proxy_for(httpx.URL("https://a.internal/"))`` is ``None``.
"""

from __future__ import annotations

import contextlib
import urllib.request
from collections.abc import Awaitable, Callable, Mapping, Sequence

import httpx


def proxy_for(url: httpx.URL, proxies: Mapping[str, str] | None = None) -> str | None:
    """The URL of the proxy *url* goes through, as httpx chooses it from *proxies*
    (``urllib.request.getproxies()``, read now when not given): the scheme's proxy, else
    ``all``'s; ``None`` for none, or for a host ``NO_PROXY`` names
    (``urllib.request.proxy_bypass``). A proxy given without a scheme is an http one."""
    if proxies is None:
        proxies = urllib.request.getproxies()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(url.host):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


async def to_first(
    send: Callable[[httpx.Request], Awaitable[httpx.Response]],
    request: httpx.Request,
    addresses: Sequence[str],
) -> httpx.Response:
    """*request* sent (by *send*) to the first of its name's checked *addresses* that takes
    the connection, in the resolver's order (a receiver may listen on one of a dual-stack
    name's addresses only); the last one's error when none does."""
    *first, last = addresses
    for address in first:
        with contextlib.suppress(httpx.ConnectError):
            return await send(_aimed(request, address))
    return await send(_aimed(request, last))


def _aimed(request: httpx.Request, address: str) -> httpx.Request:
    """*request* sent to *address*: its ``Host`` header stays the name's, as httpx made it,
    and over TLS the name is the SNI the certificate is verified for."""
    url = request.url
    if url.host == address:
        return request
    extensions = dict(request.extensions)
    if url.scheme == "https":
        extensions["sni_hostname"] = url.raw_host.decode("ascii")
    return httpx.Request(
        request.method,
        url.copy_with(host=address),
        headers=request.headers,
        stream=request.stream,
        extensions=extensions,
    )
