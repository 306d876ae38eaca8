"""Another origin's host names as the client follows them (``allow_other_origins=True``):
resolved once, every address checked, and the connection made to the address checked.

A card's URL on a name is judged by what the name resolves to, not by the name: one that
resolves to a link-local address (the cloud metadata service: ``169.254.169.254``,
``fd00:ec2::254``, ``100.100.100.200``) or to loopback (the caller's own host) leads further
in than an agent that is not there itself, as a literal address does (``_egress.inward``).
Nothing resolves the name again to connect, so an answer that changes between the check and
the connection (DNS rebinding) changes nothing: HTTP through :class:`CheckedAddresses` (the
name still in ``Host`` and SNI, the certificate verified for it), gRPC dialled at the checked
addresses with the name as its authority and TLS target name.
"""

from __future__ import annotations

import asyncio
import ipaddress
import urllib.request
from collections.abc import Sequence
from urllib.parse import urlsplit

import httpx

from apcore_a2a._addresses import IPAddress, address_class
from apcore_a2a._egress import (
    MAX_ADDRESSES,
    CheckedAddresses,
    RefusedAddress,
    Resolver,
    inward,
    lookup,
)
from apcore_a2a._proxies import ProxyUnusable, trusted_context
from apcore_a2a.client.card import origin_of
from apcore_a2a.client.errors import A2AConnectionError, CrossOriginEndpointError


def refused(host: str, addresses: Sequence[IPAddress], agent: int, base: str) -> str | None:
    """Why another origin's *host* (resolved to *addresses*) is not followed from an agent
    of class *agent* (``_egress.inward``: any of them further in), or ``None``."""
    for address in addresses:
        reason = inward(
            f"a URL on {host}", "resolves to a", address, address_class(address), base, agent
        )
        if reason is not None:
            return reason
    return None


class OtherOrigins(CheckedAddresses):
    """The transport of the client's calls to another origin (no credentials go there)."""

    def __init__(self, base: str, resolve: Resolver, agent: int) -> None:
        # The environment's proxies as httpx reads them, applied after the check.
        super().__init__(resolve, urllib.request.getproxies(), trusted_context())
        self._base, self._agent = base, agent

    async def refused(self, host: str, addresses: Sequence[IPAddress]) -> str | None:
        return refused(host, addresses, self._agent, self._base)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await super().handle_async_request(request)
        except RefusedAddress as exc:
            raise CrossOriginEndpointError(
                str(exc), url=str(request.url), agent_origin=str(origin_of(self._base))
            ) from None
        except ProxyUnusable as exc:  # no retry reaches it: told as unreachable, not a bug
            raise A2AConnectionError(str(exc)) from None


async def grpc_addresses(
    target: str, base: str, resolve: Resolver, agent: int, within: float
) -> str:
    """The checked addresses of another host's gRPC *target* (``host:port``) as the target
    gRPC dials (an ``ipv4:`` or ``ipv6:`` URI of the first ``MAX_ADDRESSES``, in the
    resolver's order), looked up within *within* seconds."""
    where = urlsplit("//" + target)
    host, port = where.hostname or "", where.port or 443
    try:
        found = await lookup(resolve, host, port, asyncio.get_running_loop().time() + within)
    except httpx.TransportError as exc:
        raise A2AConnectionError(f"the gRPC host: {exc}") from None
    reason = refused(host, found, agent, base)
    if reason is not None:
        raise CrossOriginEndpointError(reason, url=target, agent_origin=str(origin_of(base)))
    found = found[:MAX_ADDRESSES]
    if all(a.version == 4 for a in found):
        return "ipv4:" + ",".join(f"{a}:{port}" for a in found)
    # gRPC's address lists are of one family: IPv4 ones go IPv4-mapped (gRPC dials them
    # over IPv4 where IPv6 is off), so every checked address is tried, in the resolver's order.
    mapped = (a if a.version == 6 else ipaddress.IPv6Address(f"::ffff:{a}") for a in found)
    # A zone (fe80::1%eth0) as the URI gRPC percent-decodes carries it (RFC 6874).
    return "ipv6:" + ",".join(f"[{str(a).replace('%', '%25')}]:{port}" for a in mapped)
