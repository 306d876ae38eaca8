"""Which egress proxy a request of the agent's goes through: the environment's
``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` (any case), ``NO_PROXY`` exempting hosts, read as
httpx reads them with ``trust_env``. Shared by the JWKS fetch (``auth/jwks.py``) and push
deliveries (``push/policy.py``, ``push/aimed.py``): each checks a URL's addresses first, then
sends through the proxy by the URL's name, since httpx's own choice would see only the
address a request was aimed at.

Example: with ``HTTPS_PROXY=proxy:3128`` and ``NO_PROXY=.internal``,
``proxy_for(httpx.URL("https://hooks.example.com/a"))`` is ``"http://proxy:3128"`` and
``proxy_for(httpx.URL("https://a.internal/"))`` is ``None``.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping

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
