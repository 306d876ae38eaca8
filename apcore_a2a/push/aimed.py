"""A webhook POST sent to the addresses the SSRF policy checked, never to a second lookup
(DNS rebinding): the name still goes in the ``Host`` header and, for TLS, in SNI, and the
certificate is verified for it.

A name may have several checked addresses (``localhost``: ``::1`` and ``127.0.0.1``; a
dual-stack host: its AAAA and A records), and the receiver may listen on one of them only:
each is tried in the resolver's order until one takes the connection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

import httpx

__all__ = ["send_to_checked"]


async def send_to_checked(
    client: httpx.AsyncClient,
    url: str,
    addresses: Sequence[str],
    *,
    content: bytes,
    headers: Mapping[str, str],
) -> httpx.Response:
    """POST *content* to *url* at the first of *addresses* that accepts the connection
    (the answer streamed); the last one's error when none does."""
    for address in addresses[:-1]:
        with contextlib.suppress(httpx.ConnectError):
            return await client.send(_aimed(client, url, address, content, headers), stream=True)
    return await client.send(_aimed(client, url, addresses[-1], content, headers), stream=True)


def _aimed(
    client: httpx.AsyncClient,
    url: str,
    address: str,
    content: bytes,
    headers: Mapping[str, str],
) -> httpx.Request:
    target = httpx.URL(url)
    sent = dict(headers)
    extensions: dict[str, str] = {}
    if target.host != address:
        sent["Host"] = target.netloc.decode("ascii")
        if target.scheme == "https":
            extensions["sni_hostname"] = target.raw_host.decode("ascii")
        target = target.copy_with(host=address)
    return client.build_request(
        "POST", target, content=content, headers=sent, extensions=extensions
    )
