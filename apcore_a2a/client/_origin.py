"""Where the client may send requests, and where it may send its credentials.

An agent card names the URLs of the agent's interfaces, and a card is data from the
network: a hostile or misconfigured card could name another host, another port, or
``http://`` under an ``https://`` agent. The client therefore follows an interface URL
only when it has the origin (scheme, host, port) of the agent URL the caller gave -- the
origin the card was fetched from -- unless the caller opts in with
``allow_other_origins=True``. Even then, the caller's credentials (``auth``, the
``Authorization`` header and every header the caller configured) are attached only to
requests for the agent's own origin: :class:`OriginGuard` strips them from any other.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Collection
from urllib.parse import urljoin, urlsplit

import httpx

from apcore_a2a.client.errors import CrossOriginEndpointError

__all__ = ["Origin", "OriginGuard", "check_endpoint", "origin_of"]

Origin = tuple[str, str, int]

_DEFAULT_PORTS = {"http": 80, "https": 443}
# Headers the client sets per request itself; a caller's default for them is no secret.
_PROTOCOL_HEADERS = frozenset(
    {"a2a-version", "accept", "accept-encoding", "connection", "content-length"}
    | {"content-type", "host", "if-none-match", "user-agent"}
)
_ALWAYS_SECRET = frozenset({"authorization", "proxy-authorization", "cookie"})


def origin_of(url: str | httpx.URL) -> Origin | None:
    """``(scheme, host, port)`` of an absolute http(s) URL, default ports filled in."""
    parts = urlsplit(str(url))
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def _format(origin: Origin | None) -> str:
    if origin is None:
        return "no http(s) origin"
    scheme, host, port = origin
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


def check_endpoint(url: str, base: str, *, allow_other_origins: bool, direct: bool) -> str:
    """The interface URL to call for *url* as named by the card of the agent at *base*.

    A relative URL is resolved against *base*. In direct mode (an in-process app, no
    network) the URL is moved onto *base*'s origin, keeping its path. Otherwise a URL of
    another origin raises :class:`CrossOriginEndpointError` unless *allow_other_origins*.
    """
    resolved = urljoin(base + "/", url)
    if direct:
        parts = urlsplit(resolved)
        home = urlsplit(base)
        return parts._replace(scheme=home.scheme, netloc=home.netloc).geturl()
    agent, target = origin_of(base), origin_of(resolved)
    if target == agent:
        return resolved
    if allow_other_origins and target is not None:
        return resolved
    downgrade = (
        agent is not None
        and target is not None
        and (agent[0], target[0])
        == (
            "https",
            "http",
        )
    )
    raise CrossOriginEndpointError(
        f"the agent card names {resolved} ({_format(target)}), which is not the agent's "
        f"origin {_format(agent)}"
        + (" (https downgraded to http)" if downgrade else "")
        + "; pass allow_other_origins=True to follow it (credentials are never sent there)",
        url=resolved,
        agent_origin=_format(agent),
    )


class OriginGuard(httpx.Auth):
    """Attach credentials only to requests for the agent's origin.

    For the agent's origin, *inner* (the caller's ``httpx.Auth``, if any) runs as usual.
    For any other origin, *inner* is skipped and ``Authorization``, ``Cookie`` and every
    header the caller configured (*secret_headers*, bar the protocol headers the client
    sets per request) are removed before the request leaves.
    """

    def __init__(
        self, origin: Origin | None, inner: httpx.Auth | None, secret_headers: Collection[str]
    ) -> None:
        self._origin = origin
        self._inner = inner
        self._secret = _ALWAYS_SECRET | {
            h.lower() for h in secret_headers if h.lower() not in _PROTOCOL_HEADERS
        }

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        if origin_of(request.url) != self._origin:
            for name in self._secret:
                request.headers.pop(name, None)
            yield request
            return
        if self._inner is None:
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
