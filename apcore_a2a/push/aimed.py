"""A webhook POST sent where the SSRF policy's check says (``policy.Checked``).

Directly, to the addresses the policy checked, never to a second lookup (DNS rebinding):
the name still goes in the ``Host`` header and, for TLS, in SNI, and the certificate is
verified for it. A name may have several checked addresses (``localhost``: ``::1`` and
``127.0.0.1``; a dual-stack host: its AAAA and A records), and the receiver may listen on
one of them only: each is tried in the resolver's order until one takes the connection.

Through the egress proxy the environment names for the URL (``_proxies.proxy_for``), by the
URL's name: the proxy resolves it (``CONNECT host:port`` for https, the certificate still
verified for the name; an IPv6 literal in brackets, ``upstream/proxy_targets.py``), as the
JWKS fetch does. httpx's own reading of the proxy settings
(``trust_env``) is off: it would see only the address a request was aimed at.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from apcore_a2a._egress import NamePools
from apcore_a2a._proxies import trusted_context
from apcore_a2a.push.policy import Checked

__all__ = ["Webhooks"]

#: The connections of deliveries: kept as the client's (``_egress.KEPT``), but any number
#: at once, to a name or through a proxy. The sender's slots bound them
#: (``push_max_deliveries``, half at most for one caller): a bound of the pool's own,
#: shared by every caller's webhooks on a name (and through a proxy, on any name), let
#: one caller's stalled receivers hold every connection while another's deliveries
#: waited for one until their attempts ran out of time.
LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=20, keepalive_expiry=4.0)


class Webhooks:
    """The sender's connections, kept alive per webhook name and per proxy
    (``_egress.NamePools``: a connection verified for one name never carries a delivery
    for another). No redirects: a 3xx could point past the SSRF policy. No cookies: an
    answer's ``Set-Cookie`` is never kept (it would go out again with every later
    delivery to its host, other callers' webhooks included).

    A delivery whose kept connection the receiver closed as it went out (its idle
    timeout), before any byte of an answer, is sent once more at once on another: its
    JWT's ``jti`` is the delivery's, the same on every retry, so a receiver that had it
    after all tells it apart (docs/push.md)."""

    def __init__(self, timeout: float) -> None:
        verify = trusted_context()
        self._kept = NamePools(verify, replay_posts=True, limits=LIMITS)
        # Builds the requests (httpx's headers, the timeout); they go out by self._kept.
        self._client = httpx.AsyncClient(verify=verify, timeout=timeout, trust_env=False)

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
        when none does. ``ProxyUnusable`` for a proxy httpx cannot use."""
        sent = self._client.build_request("POST", url, content=content, headers=headers)
        if checked.proxy is not None:
            return await self._kept.through(checked.proxy, sent)
        name = sent.url.raw_host.decode("ascii")
        return await self._kept.send(name, sent, checked.addresses, deadline)

    async def aclose(self) -> None:
        await self._kept.aclose()
        await self._client.aclose()
