"""What an IP address finally delivers to: the IPv4 address inside an IPv6 form, the cloud
metadata addresses, and how far inward an address leads (its class). Read by the push SSRF
policy, the JWKS fetch (a redirect may not lead further in) and the client (a card's
interface URL may not either)."""

from __future__ import annotations

import ipaddress
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Address classes, from the most public: a redirect or a card may lead to the class of
#: where it came from or a more public one, never further in.
CLASSES = ("public", "private", "loopback", "link-local")
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")  # "this host" to Linux, as 127/8

# RFC 6052 well-known prefix; the local-use 64:ff9b:1::/48 has operator-chosen layouts
# and classes as reserved (private).
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
#: Other IPv6 forms with an IPv4 address in their last 32 bits: IPv4-translated (RFC 2765;
#: a SIIT translator on the way delivers it) and the deprecated IPv4-compatible (RFC 4291
#: §2.5.5.1; a tunnel delivers it). Not routed here, they are reserved, which only push
#: refuses; the other readers class them as their IPv4 address.
_CARRY_IPV4 = (ipaddress.ip_network("::ffff:0:0:0/96"), ipaddress.ip_network("::/96"))
#: Cloud metadata endpoints (AWS/GCP/Azure/Oracle use the link-local IPv4 one; AWS also
#: answers on IPv6; Alibaba Cloud on 100.100.100.200, in the carrier-grade NAT range, which
#: would otherwise class as merely private).
METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)


def embedded_ipv4(addr: IPAddress) -> tuple[str, list[ipaddress.IPv4Address]] | None:
    """``(kind, [IPv4, ...])`` for IPv6 forms that deliver to an IPv4 address inside
    (Teredo: to its client through its server, so both count)."""
    if not isinstance(addr, ipaddress.IPv6Address):
        return None
    if addr.ipv4_mapped is not None:
        return "IPv4-mapped", [addr.ipv4_mapped]
    if addr.sixtofour is not None:
        return "6to4", [addr.sixtofour]
    if addr.teredo is not None:
        server, client = addr.teredo
        return "Teredo", [client, server]
    if addr in _NAT64:
        return "NAT64", [ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)]
    return None


def address_class(ip: IPAddress) -> int:
    """How private *ip* is, as an index of :data:`CLASSES`; an IPv6 form of an IPv4 address
    (mapped, 6to4, Teredo, NAT64) is the class of the address it delivers to."""
    embedded = embedded_ipv4(ip)
    if embedded is not None:
        return max(address_class(inner) for inner in embedded[1])
    if ip.version == 6 and int(ip) > 1 and any(ip in carrier for carrier in _CARRY_IPV4):
        return address_class(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip.is_link_local or ip in METADATA:  # where cloud metadata services answer
        return 3
    if ip.is_loopback or ip.is_unspecified or (ip.version == 4 and ip in _THIS_NETWORK):
        return 2
    # Only public unicast is public: Python's is_global (3.11) also passes multicast,
    # site-local fec0::/10 and reserved ranges such as the local-use NAT64 64:ff9b:1::/48,
    # whose operator-chosen layout delivers to its own IPv4 network (push refuses them too).
    special = ip.is_multicast or ip.is_reserved or (ip.version == 6 and ip.is_site_local)
    return 0 if ip.is_global and not special else 1


def host_class(host: str) -> int:
    """The class of a URL's *host* without a lookup: an address in any form the resolver
    reads as one (``2852039166``, ``0xa9fea9fe``, ``127.1``; a zone and the root's dot left
    out: a proxy may drop it), ``localhost`` and its subdomains as loopback (RFC 6761), any
    other name as public (what it resolves to is not known here)."""
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return 2
    try:
        found = socket.getaddrinfo(name.partition("%")[0], None, flags=socket.AI_NUMERICHOST)
    except (OSError, UnicodeError, ValueError):
        return 0  # a name
    return max(address_class(ipaddress.ip_address(str(a[4][0]).partition("%")[0])) for a in found)
