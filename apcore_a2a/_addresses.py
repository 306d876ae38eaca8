"""What an IP address finally delivers to: the IPv4 address inside an IPv6 form, and the
cloud metadata addresses. Read by the push SSRF policy and the JWKS fetch alike."""

from __future__ import annotations

import ipaddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# RFC 6052 well-known prefix; the local-use 64:ff9b:1::/48 has operator-chosen layouts
# and stays refused as reserved.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
#: Cloud metadata endpoints (AWS/GCP/Azure use the IPv4 one; AWS also answers on IPv6).
METADATA = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
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
