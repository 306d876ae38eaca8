"""Which interface of the card the client calls, and where it may send its credentials.

A card is data from the network and could name another host, port, or ``http://`` under an
``https://`` agent: the client follows an interface URL only on the origin (scheme, host,
port) of the agent URL the caller gave, unless ``allow_other_origins=True``; even then
:class:`OriginGuard` keeps the caller's credentials and headers to the agent's own origin.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Collection, Mapping
from typing import Any, Literal, NamedTuple
from urllib.parse import urljoin, urlsplit

import httpx

from apcore_a2a.client.errors import A2ADiscoveryError, CrossOriginEndpointError

Protocol = Literal["auto", "1.0", "0.3"]
#: In the client's order of preference.
BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")


class Endpoint(NamedTuple):
    """The interface a call goes to (a gRPC ``url`` is ``host:port``; ``secure``: TLS)."""

    binding: str
    version: str
    url: str
    secure: bool = False


Origin = tuple[str, str, int]

_DEFAULT_PORTS = {"http": 80, "https": 443}
# Headers the client sets per request itself; a caller's default for them is no secret.
_PROTOCOL_HEADERS = frozenset(
    {"a2a-version", "accept", "accept-encoding", "connection", "content-length"}
    | {"content-type", "host", "if-none-match", "user-agent"}
)
_ALWAYS_SECRET = frozenset({"authorization", "proxy-authorization", "cookie"})


def origin_of(url: str | httpx.URL) -> Origin | None:
    parts = urlsplit(str(url))  # scheme and hostname come lowercased
    if parts.scheme in _DEFAULT_PORTS and parts.hostname:
        with contextlib.suppress(ValueError):  # a port out of range
            return parts.scheme, parts.hostname, parts.port or _DEFAULT_PORTS[parts.scheme]
    return None


def _format(origin: Origin | None) -> str:
    if origin is None:
        return "no http(s) origin"
    scheme, host, port = origin
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


def check_endpoint(url: str, base: str, *, allow_other_origins: bool, direct: bool) -> str:
    """The URL to call for a card's *url*: resolved against *base*; in direct mode (no
    network) moved onto *base*'s origin; else refused on another origin unless allowed."""
    resolved = urljoin(base + "/", url)
    if direct:
        home = urlsplit(base)
        return urlsplit(resolved)._replace(scheme=home.scheme, netloc=home.netloc).geturl()
    agent, target = origin_of(base), origin_of(resolved)
    if target == agent or (allow_other_origins and target is not None):
        return resolved
    downgrade = agent and target and (agent[0], target[0]) == ("https", "http")
    raise CrossOriginEndpointError(
        f"the agent card names {resolved} ({_format(target)}), which is not the agent's "
        f"origin {_format(agent)}"
        + (" (https downgraded to http)" if downgrade else "")
        + "; pass allow_other_origins=True to follow it (credentials are never sent there)",
        url=resolved,
        agent_origin=_format(agent),
    )


def _offered(card: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    pairs = [
        (i.get("protocolBinding"), str(i.get("protocolVersion") or "0"), i.get("url"))
        for i in card.get("supportedInterfaces") or []
        if isinstance(i, Mapping)
    ]  # an unversioned interface is a 0.3-era declaration (the SDK reads it that way too)
    pairs.append((card.get("preferredTransport") or "JSONRPC", "0", card.get("url")))
    pairs += [
        (i.get("transport"), "0", i.get("url"))
        for i in card.get("additionalInterfaces") or []
        if isinstance(i, Mapping)
    ]
    return [(str(b).upper(), v.split(".")[0], str(u)) for b, v, u in pairs if b and u]


def select_endpoint(
    card: Mapping[str, Any] | None,
    base: str,
    protocol: Protocol,
    *,
    allow_other_origins: bool,
    direct: bool,
) -> Endpoint:
    """JSON-RPC when the card offers it, else HTTP+JSON, else gRPC (not in direct mode);
    ``auto`` prefers 1.0; a pinned version without a matching interface posts JSON-RPC
    to *base*."""
    offered = _offered(card) if card else []
    for binding in BINDINGS[:2] if direct else BINDINGS:
        for version in ("1.0", "0.3") if protocol == "auto" else (protocol,):
            for name, major, url in offered:
                if (name, major) == (binding, version[0]):
                    if binding == "GRPC":
                        return _grpc_endpoint(version, url, base, allow_other_origins)
                    checked = check_endpoint(
                        url, base, allow_other_origins=allow_other_origins, direct=direct
                    )
                    return Endpoint(binding, version, checked)
    if protocol == "auto" and offered:
        bindings = ", ".join(sorted({name for name, _, _ in offered}))
        where = "in-process " if direct else ""
        raise A2ADiscoveryError(
            f"the agent offers no interface this {where}client speaks (only {bindings})"
        )
    return Endpoint("JSONRPC", "0.3" if protocol == "auto" else protocol, base)


def _grpc_endpoint(version: str, url: str, base: str, allow_other_origins: bool) -> Endpoint:
    """Host only, not origin (gRPC has its own port); TLS when the address says so or,
    scheme-less, when the agent URL is https."""
    scheme, _, target = url.rpartition("://")
    home = urlsplit(base)
    host = urlsplit("//" + target).hostname
    if host != home.hostname and not allow_other_origins:
        raise CrossOriginEndpointError(
            f"the agent card names the gRPC address {url}, which is not on the agent's "
            f"host {home.hostname}; pass allow_other_origins=True to follow it "
            "(credentials are never sent there)",
            url=url,
            agent_origin=_format(origin_of(base)),
        )
    secure = scheme.lower() in ("https", "grpcs") or (not scheme and home.scheme == "https")
    return Endpoint("GRPC", version, target.rstrip("/"), secure)


class OriginGuard(httpx.Auth):
    """Runs *inner* (the caller's ``httpx.Auth``) for the agent's origin; for any other,
    removes ``Authorization``, ``Cookie`` and the caller's *secret_headers* instead."""

    def __init__(
        self, origin: Origin | None, inner: httpx.Auth | None, secret_headers: Collection[str]
    ) -> None:
        self._origin = origin
        self._inner = inner
        self._secret = _ALWAYS_SECRET | {
            h.lower() for h in secret_headers if h.lower() not in _PROTOCOL_HEADERS
        }

    async def metadata(self, request: httpx.Request) -> dict[str, str]:
        """The caller's headers and credentials for *request*, as gRPC call metadata."""
        flow = self.async_auth_flow(request)
        sent = await flow.__anext__()
        await flow.aclose()
        return {k: v for k, v in sent.headers.items() if k not in _PROTOCOL_HEADERS}

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        foreign = origin_of(request.url) != self._origin
        for name in self._secret if foreign else ():
            request.headers.pop(name, None)
        if foreign or self._inner is None:
            yield request
            return
        flow = self._inner.async_auth_flow(request)
        outgoing = await flow.__anext__()
        while True:
            response = yield outgoing
            try:
                outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
