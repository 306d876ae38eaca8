"""A webhook POST sent where the SSRF policy's check says (``policy.Checked``).

Directly, to the addresses the policy checked, never to a second lookup (DNS rebinding):
the name still goes in the ``Host`` header and, for TLS, in SNI, and the certificate is
verified for it. A name may have several checked addresses (``localhost``: ``::1`` and
``127.0.0.1``; a dual-stack host: its AAAA and A records), and the receiver may listen on
one of them only: each is tried in the resolver's order until one takes the connection.

Through the egress proxy the environment names for the URL (``_egress.proxy_for``), by the
URL's name: the proxy resolves it (``CONNECT host:port`` for https, the certificate still
verified for the name; an IPv6 literal in brackets, ``upstream/proxy_targets.py``), as the
JWKS fetch does. httpx's own reading of the proxy settings
(``trust_env``) is off: it would see only the address a request was aimed at.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from apcore_a2a._egress import to_first
from apcore_a2a.push.policy import Checked
from apcore_a2a.upstream.proxy_targets import bracketed

__all__ = ["Webhooks"]

#: No keep-alive: pools key by address, and a connection verified for one name must not
#: serve another.
_ONE_USE = httpx.Limits(max_keepalive_connections=0)


class Webhooks:
    """The sender's HTTP clients: the direct one, and one per proxy made at its first use.
    No redirects: a 3xx could point past the SSRF policy."""

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        # Built once (loading the CA bundle blocks the loop ~10 ms), reading SSL_CERT_FILE
        # and SSL_CERT_DIR as httpx's trust_env does.
        self._verify = httpx.create_ssl_context()
        self._clients: dict[str | None, httpx.AsyncClient] = {None: self._client(None)}

    def _client(self, proxy: str | None) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            proxy=proxy,
            verify=self._verify,
            timeout=self._timeout,
            follow_redirects=False,
            limits=_ONE_USE,
            trust_env=False,
            # A jar that keeps nothing: a receiver's Set-Cookie would go out again with
            # every later delivery to its host, other callers' webhooks included.
            cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),
        )

    async def post(
        self,
        url: str,
        checked: Checked,
        *,
        content: bytes,
        headers: Mapping[str, str],
        deadline: float | None = None,
    ) -> httpx.Response:
        """POST *content* to *url* where *checked* says (the answer streamed): through its
        proxy, else at the first of its addresses that accepts the connection by *deadline*
        (the loop's clock; by default the connect timeout from now), the last one's error
        when none does. ``ValueError`` for a proxy httpx cannot use."""
        if checked.proxy is not None:
            client = self._clients.get(checked.proxy)
            if client is None:
                try:
                    client = self._clients[checked.proxy] = self._client(checked.proxy)
                except (ImportError, ValueError) as exc:  # socks without socksio, a bad scheme
                    raise ValueError(f"the proxy cannot be used ({type(exc).__name__})") from None
            sent = client.build_request("POST", url, content=content, headers=headers)
            return await client.send(bracketed(sent), stream=True)
        client = self._clients[None]
        sent = client.build_request("POST", url, content=content, headers=headers)
        return await to_first(partial(client.send, stream=True), sent, checked.addresses, deadline)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
