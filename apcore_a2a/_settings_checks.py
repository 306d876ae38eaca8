"""Checks of single setting values that pydantic's types do not express: each is an
annotated type of :class:`apcore_a2a.settings.Settings`, so a bad value is refused at
start with the one line naming its source, whatever that source and the rest of the
configuration (a value used only by some task stores is checked with every store).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

from apcore_a2a._settings_sources import Numbers, Strings

_FERNET_HINT = (
    "must be a Fernet key: 32 url-safe base64-encoded bytes (make one with: python -c "
    "'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
)


def _fernet_key(value: str | None) -> str | None:
    # The rule cryptography's Fernet() applies, without importing it (an optional extra).
    if value is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(value.encode())
    except (binascii.Error, ValueError):
        raise ValueError(_FERNET_HINT) from None
    if len(raw) != 32:
        raise ValueError(_FERNET_HINT)
    return value


#: ``push_encryption_key``: a Fernet key, or unset
FernetKey = Annotated[str | None, AfterValidator(_fernet_key)]


_PATH = re.compile(r"^/[^\s?#]*$")
# A host name or an IPv4 address, "*." in front for every subdomain (Starlette's pattern).
_HOST_NAME = re.compile(r"^(\*\.)?[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$")
_WITH_PORT = re.compile(r"^(\[[^\]]*\]|[^:]*):\d+$")
# What a browser sends as Origin: scheme://host[:port]; a trailing "/" is tolerated (dropped).
_ORIGIN = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/\s?#@]+/?$")


def _url_path(value: str) -> str:
    if not _PATH.match(value):
        raise ValueError("must be a URL path starting with '/' (no spaces, query or fragment)")
    return value


def _http_url(value: str | None) -> str | None:
    # Put on the card for clients to call: anything but http(s) with a host cannot be.
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or " " in value:
        raise ValueError("must be an http:// or https:// URL with a host")
    return value


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text.removeprefix("[").removesuffix("]"))
    except ValueError:
        return False
    return True


def _host_problem(value: str, *, patterns: bool) -> str | None:
    """What is wrong with *value* as a host name or address (``None``: nothing);
    *patterns* admits ``*`` and ``*.example.com``."""
    name = _HOST_NAME.match(value)
    if (name and (patterns or not value.startswith("*"))) or _is_ipv6(value):
        return None
    if patterns and value == "*":
        return None
    if _WITH_PORT.match(value):
        return f"{value!r}: give the host name without the port"
    shape = "a name, an address or *.example.com" if patterns else "a name or an address"
    return f"{value!r} is not a host name ({shape}, without scheme or port)"


def _host_names(values: tuple[str, ...]) -> tuple[str, ...]:
    # The Host header is compared without its port: a pattern with one never matches, and
    # Starlette asserts on a misplaced "*" at the first request rather than at start.
    for value in values:
        problem = _host_problem(value, patterns=True)
        if problem:
            raise ValueError(problem)
    return values


def _listen_host(value: str) -> str:
    # Caught here, "http://0.0.0.0" or "0.0.0.0:8000" is named as the setting it came from,
    # rather than left to the resolver's "Name or service not known" at bind time.
    if value and not value.strip():  # only "" is every interface (empty_problem's rule)
        raise ValueError('must not be only whitespace ("" listens on every interface)')
    problem = _host_problem(value, patterns=False) if value else None
    if problem:
        raise ValueError(problem)
    return value


def _origins(values: tuple[str, ...]) -> tuple[str, ...]:
    # An origin never matched by a browser's Origin header would only look like a grant.
    for value in values:
        if value != "*" and not _ORIGIN.match(value):
            raise ValueError(
                f"{value!r} is not an origin (scheme://host[:port], as in "
                "https://app.example.com, or *)"
            )
    return values


def _name_servers(values: tuple[str, ...]) -> tuple[str, ...]:
    # c-ares takes these forms only, and would refuse another at the first webhook lookup.
    for value in values:
        if not _name_server(value):
            raise ValueError(
                f"{value!r} is not a name server (an IP address, with :port if not 53, as in "
                "192.0.2.53, 192.0.2.53:5353 or [2001:db8::53]:53)"
            )
    return values


def _name_server(value: str) -> bool:
    address, port = value, "53"
    with_port = re.fullmatch(r"\[(.+)\]:(\d+)", value) or re.fullmatch(r"([^:]+):(\d+)", value)
    if with_port:
        address, port = with_port.groups()
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return 1 <= int(port) <= 65535


# What the Explorer's routes can be mounted at (explorer/__init__.py applies the same rule).
_EXPLORER_PREFIX = re.compile(r"^(/[A-Za-z0-9._~-]+)+/?$")


def _explorer_prefix(value: str) -> str:
    if not _EXPLORER_PREFIX.match(value):
        raise ValueError("must be a non-root URL path like '/explorer'")
    return value


def _port(value: int) -> int:
    if not 1 <= value <= 65535:
        raise ValueError("must be between 1 and 65535")
    return value


def _delays(values: tuple[float, ...]) -> tuple[float, ...]:
    if any(value < 0 for value in values):
        raise ValueError("must not be negative")
    return values


#: ``port``, ``grpc_port``: a TCP port
Port = Annotated[int, AfterValidator(_port)]
#: ``rpc_path``: an absolute URL path (Starlette asserts on anything else)
UrlPath = Annotated[str, AfterValidator(_url_path)]
#: ``url``: the public base URL put on the card, or unset
HttpUrl = Annotated[str | None, AfterValidator(_http_url)]
#: ``host``: the address to listen on ("" and "::" are every interface)
ListenHost = Annotated[str, AfterValidator(_listen_host)]
#: ``allowed_hosts``: names the Host header is compared with
HostNames = Annotated[Strings, AfterValidator(_host_names)]
#: ``cors_origins``: browser origins
Origins = Annotated[Strings, AfterValidator(_origins)]
#: ``push_dns_servers``: name servers by address
NameServers = Annotated[Strings, AfterValidator(_name_servers)]
#: ``explorer_prefix``: a path below the root (checked whether the Explorer is on or not)
ExplorerPrefix = Annotated[str, AfterValidator(_explorer_prefix)]
#: The most ``workers``: each is a whole process with its own database connections (a
#: pool each on one PostgreSQL, whose default ``max_connections`` is 100), and one host
#: rarely has more cores; a bigger number is a typo that would fork that many processes.
MAX_WORKERS = 64
#: ``push_retry_delays``: seconds, none negative
Delays = Annotated[Numbers, AfterValidator(_delays)]
#: seconds grpcio takes as milliseconds in a C int (the ``grpc_*`` durations, and
#: ``header_timeout``, which bounds the gRPC handshake too): larger values fail at bind
GrpcSeconds = Annotated[float, Field(le=2**31 // 1000)]
