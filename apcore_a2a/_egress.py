"""Where a request of the agent's to a URL it was given goes: through the egress proxy the
environment names for it (``_proxies.proxy_for``: httpx's rule for ``trust_env``), by the
URL's name; else to the addresses its name was checked to have, never to a second lookup
(DNS rebinding). Each caller checks a URL's addresses first (httpx's own proxy choice would
see only the address a request was aimed at), and keeps connections alive per name and per
proxy (:class:`NamePools`).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import re
import socket
import ssl
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from apcore_a2a._addresses import CLASSES, IPAddress, address_class, host_class
from apcore_a2a._proxies import KEPT, proxy_for, proxy_transport
from apcore_a2a._text import echoed
from apcore_a2a.upstream.proxy_targets import bracketed
from apcore_a2a.upstream.received_bytes import counting, received

#: ``resolve(host, port) -> addresses`` (the event loop's ``getaddrinfo`` by default).
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
#: Addresses of one name tried at most (after checking every one): a hostile answer of
#: hundreds is not tried one by one.
MAX_ADDRESSES = 8
_ZONE = re.compile(r"[A-Za-z0-9_.-]*")
#: Names whose connections :class:`NamePools` keeps (a pool each), the least recently
#: used one's closed first.
MAX_NAMES = 16
#: Methods whose request is sent again after a kept connection closed unanswered
#: (RFC 9110 §9.2.2: idempotent).
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})


class CheckedAddresses(httpx.AsyncBaseTransport):
    """Requests sent to the addresses their host name was resolved to once and checked
    (:meth:`refused`), never to a second lookup (DNS rebinding); the name stays in the
    ``Host`` header and, over TLS, in SNI, so the certificate is verified for it.
    The lookup and the connection share the request's connect timeout. By default the
    first request (the configured URL) sets the most private class allowed
    (:func:`address_class`); a redirect to an address of a more private one is refused.
    Connections are kept alive per name (:class:`NamePools`); every request is still
    looked up and checked. *inner*, when given, takes every request instead (a test's
    transport).

    A request *proxies* (``urllib.request.getproxies()``) name a proxy for, and
    ``NO_PROXY`` does not exempt, is checked the same way, then sent through the proxy,
    which resolves the name itself: its answer is the proxy's to trust. A name that does
    not resolve here is the proxy's to reach (classed public): behind an egress proxy, a
    host may resolve no outside name."""

    def __init__(
        self,
        resolve: Resolver,
        proxies: Mapping[str, str] | None = None,
        verify: ssl.SSLContext | bool = True,
        inner: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._inner, self._resolve = inner, resolve
        self._proxies = dict(proxies or {})
        self._kept = NamePools(verify)
        self._ceiling: int | None = None

    async def refused(self, host: str, addresses: Sequence[IPAddress]) -> str | None:
        """Why a request to *host* may not go to *addresses* (``None``: it may)."""
        classes = [address_class(ip) for ip in addresses] or [0]  # unresolved: the proxy's
        if self._ceiling is None:
            self._ceiling = max(classes)
        worst = max(range(len(classes)), key=classes.__getitem__)
        if classes[worst] <= self._ceiling:
            return None
        return (
            f"refused a redirect to a {CLASSES[classes[worst]]} address "
            f"({addresses[worst]}; the JWKS URL's are {CLASSES[self._ceiling]})"
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        host = url.raw_host.decode("ascii")  # IDNA: what DNS and SNI carry
        via = proxy_for(url, self._proxies)
        deadline = deadline_of(request)
        try:  # a zone is an IPv6 literal's only: "10.0.0.6%.evil.test" is a name to look up
            parsed = [ipaddress.ip_address(host.partition("%")[0] if ":" in host else host)]
            literal = True
        except ValueError:
            literal = False
            port = url.port or (443 if url.scheme == "https" else 80)
            try:
                parsed = await lookup(self._resolve, host, port, deadline)
            except Unresolved:
                if via is None:
                    raise
                parsed = []  # the proxy's to reach
        reason = await self.refused(host, parsed)
        if reason is not None:
            raise RefusedAddress(reason)
        if via is not None:  # an IPv6 literal named to it in brackets
            return await self._kept.through(via, request)
        # A literal goes as given (nothing to look up), but a zone only on link-local: on
        # another address it is dropped, as in lookup(), and no resolver reads its text.
        checked = None if literal and ("%" not in host or parsed[0].is_link_local) else parsed
        if self._inner is not None:
            return await to_first(self._inner.handle_async_request, request, checked, deadline)
        return await self._kept.send(host, request, checked, deadline)

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()
        await self._kept.aclose()


class NamePools:
    """Connections kept alive per host name, for requests sent to the addresses the name
    was checked to have, and per egress proxy.

    Each name has a pool of its own (httpx's, keyed within it by scheme, address and
    port, with *verify*), so a connection verified for one name never serves another,
    even on the same address, and a kept connection serves a request only when its
    address is among those the caller checked for it now. At most :data:`MAX_NAMES`
    names' pools are kept, the least recently used idle one closed first (one with a
    request or answer in flight is closed at a later request, once idle). Through a
    proxy, connections key by the URL's name and port (httpcore's), as the proxy
    resolves the name.

    A request that went out on a kept connection which turns out closed or reset before
    its answer's head was read (the server's idle timeout met it on the way; httpx's
    ``RemoteProtocolError``, ``ReadError``, ``WriteError``, which a garbled head on a kept
    connection raises too) is sent once more, at once, on the connection the pool gives
    next, as HTTP clients do (RFC 9110 §9.2.2), when it may be: an idempotent method, or a
    POST where *replay_posts* says, its body held in memory so that it can be sent whole
    again. A failure on a connection opened for it is not, nor is a second one."""

    def __init__(
        self,
        verify: ssl.SSLContext | bool = True,
        *,
        replay_posts: bool = False,
        limits: httpx.Limits = KEPT,
    ):
        self._verify = verify
        #: Each pool's, and each proxy's (push: no bound on connections, which its senders'
        #: slots bound per caller, so one caller's stalled receivers hold none of another's).
        self._limits = limits
        #: Whether a POST may be sent again too (push deliveries: a retry carries the same
        #: delivery id, which the receiver is told to deduplicate by).
        self._replay_posts = replay_posts
        self._pools: OrderedDict[str, _Pool] = OrderedDict()  # name -> its connections
        self._via: dict[str, httpx.AsyncHTTPTransport] = {}  # proxy URL -> its transport

    async def send(
        self,
        name: str,
        request: httpx.Request,
        checked: Sequence[IPAddress | str] | None,
        deadline: float | None,
    ) -> httpx.Response:
        """*request* to *name* sent on the name's connections (:func:`to_first`)."""
        pool = self._pools.get(name) or counting(_Pool(verify=self._verify, limits=self._limits))
        self._pools[name] = pool
        self._pools.move_to_end(name)
        pool.active += 1  # before any wait: not closed as idle meanwhile
        try:
            await self._trim()
            send = functools.partial(self._replayed, pool)
            response = await to_first(send, request, checked, deadline)
        except BaseException:
            pool.active -= 1
            raise
        response.stream = _Counted(response.stream, pool)
        return response

    async def through(self, proxy: str, request: httpx.Request) -> httpx.Response:
        """*request* sent through *proxy* (an IPv6 literal named to it in brackets);
        :class:`ProxyUnusable` for a proxy httpx cannot use."""
        transport = self._via.get(proxy)
        if transport is None:
            transport = counting(proxy_transport(proxy, self._verify, self._limits))
            self._via[proxy] = transport
        return await self._replayed(transport, bracketed(request))

    async def _replayed(
        self, transport: httpx.AsyncBaseTransport, request: httpx.Request
    ) -> httpx.Response:
        """*request* sent by *transport*, and once more when it went out on a kept
        connection that closed before any answer, when it may be (the class docstring)."""
        again = request.method in IDEMPOTENT or (self._replay_posts and request.method == "POST")
        again = again and isinstance(request.stream, httpx.ByteStream)
        opened = False
        own = request.extensions.get("trace")

        async def trace(event: str, info: dict[str, Any]) -> None:
            nonlocal opened  # a connection made for this request (to the proxy too)
            opened = opened or event == "connection.connect_tcp.started"
            if own is not None:
                await own(event, info)

        first = httpx.Request(
            request.method,
            request.url,
            headers=request.headers,
            stream=request.stream,
            extensions={**request.extensions, "trace": trace},
        )
        with received() as answered:  # bytes of an answer: the server took the request
            try:
                return await transport.handle_async_request(first)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                if opened or answered() or not again:
                    raise
        return await transport.handle_async_request(request)

    async def _trim(self) -> None:
        """Past :data:`MAX_NAMES` pools, the least recently used idle ones closed."""
        idle = [name for name, pool in self._pools.items() if not pool.active]
        # Taken out at once: a request may take one up while another is being closed.
        gone = [self._pools.pop(name) for name in idle[: max(len(self._pools) - MAX_NAMES, 0)]]
        for pool in gone:
            await pool.aclose()

    async def aclose(self) -> None:
        for transport in (*self._pools.values(), *self._via.values()):
            await transport.aclose()
        self._pools.clear()
        self._via.clear()


class _Pool(httpx.AsyncHTTPTransport):
    """One name's connections, and how many of its answers are in flight."""

    active = 0


class _Counted(httpx.AsyncByteStream):
    """An answer's body from *pool*, counted in flight there until it is closed."""

    def __init__(self, stream: httpx.SyncByteStream | httpx.AsyncByteStream, pool: _Pool):
        assert isinstance(stream, httpx.AsyncByteStream)  # an async transport's
        self._stream = stream
        self._pool: _Pool | None = pool  # None once closed

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.active -= 1
            self._pool = None
        await self._stream.aclose()


def agents_class(base: str) -> int:
    """How far inward the agent at *base* is (an index of ``CLASSES``), as its URL says
    without a lookup: what its name resolves to is the agent's to answer (it may add the
    caller's loopback to it), so a name counts as public."""
    return host_class(urlsplit(base).hostname or "")


def inward(named: str, how: str, address: object, leads: int, base: str, agent: int) -> str | None:
    """Why the client does not follow a card's *named* URL, which *how* (``"is a"``,
    ``"resolves to a"``) *address* of class *leads*, from the agent at *base* (of class
    *agent*): it leads further in, to link-local (the metadata service) or loopback (the
    caller's own host). A private address is a network's own, as an agent's name may
    resolve to one (``client/card.py``, ``client/_calls.py``)."""
    if leads < 2 or leads <= agent:
        return None
    return (
        f"the agent card names {named}, which {how} {CLASSES[leads]} address ({address}), "
        f"and the agent at {base} is not: it is not followed, other origins allowed or not"
    )


class Unresolvable(httpx.ConnectError):
    """A host name whose lookup failed; *problem* says how."""

    def __init__(self, host: str, problem: str) -> None:
        super().__init__(f"{host!r} {problem}")
        self.problem = problem


class Unresolved(Unresolvable):
    """A host name that has no address here (an egress proxy may still reach it)."""


class Unusable(Unresolvable):
    """A custom resolver's answer that is no address: asking again cannot mend it."""


def deadline_of(request: httpx.Request) -> float | None:
    """When *request*'s connect timeout ends (the loop's clock), from now."""
    connect = request.extensions.get("timeout", {}).get("connect")
    return None if connect is None else asyncio.get_running_loop().time() + connect


async def lookup(
    resolve: Resolver, host: str, port: int, deadline: float | None
) -> list[IPAddress]:
    """The addresses of *host* by *resolve*, by *deadline* (the loop's clock), once
    each, in its order, a link-local address's zone (``fe80::1%eth0``) kept:
    ``httpx.ConnectTimeout`` when it takes longer, :class:`Unresolved` when it finds none
    (a custom resolver's ``None`` too), :class:`Unresolvable` when a custom resolver fails,
    :class:`Unusable` when it answers a non-address."""
    try:
        async with asyncio.timeout_at(deadline):
            found = [str(a) for a in await resolve(host, port) or ()]
    except TimeoutError:
        raise httpx.ConnectTimeout(f"{host!r} was not resolved in time") from None
    except (OSError, UnicodeError):
        found = []
    except Exception as exc:  # a custom resolver's own failure: not the proxy's
        raise Unresolvable(host, f"could not be resolved ({type(exc).__name__})") from None
    parsed = []
    for text in found:
        try:  # a zone is an interface's name or number, never URL syntax
            bare, _, zone = text.partition("%")
            if not _ZONE.fullmatch(zone):
                raise ValueError(text)
            address = ipaddress.ip_address(bare)  # a zone counts on link-local only
            parsed.append(ipaddress.ip_address(text) if address.is_link_local else address)
        except ValueError:  # a custom resolver's answer
            raise Unusable(host, f"resolved to an unusable address ({echoed(text)})") from None
    if not parsed:
        raise Unresolved(host, "could not be resolved")
    return list(dict.fromkeys(parsed))  # once each, however spelt


class RefusedAddress(ValueError):
    """A request's host resolves to an address :meth:`CheckedAddresses.refused` refuses."""


async def system_lookup(host: str, port: int) -> list[str]:
    """The addresses of *host*, by the event loop's resolver (a thread of the default pool)."""
    loop = asyncio.get_running_loop()
    found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    # An IPv6 link-local address's zone comes apart: its interface's index.
    return [f"{a[0]}%{a[3]}" if len(a) == 4 and a[3] else str(a[0]) for *_, a in found]


async def to_first(
    send: Callable[[httpx.Request], Awaitable[httpx.Response]],
    request: httpx.Request,
    addresses: Sequence[object] | None,
    deadline: float | None = None,
) -> httpx.Response:
    """*request* sent (by *send*) to the first of its name's checked *addresses* (the first
    :data:`MAX_ADDRESSES`; ``None``: to its URL's own, a literal address) that takes the
    connection, in the resolver's order (a receiver may listen on one of a dual-stack
    name's addresses only), all by *deadline* (the loop's clock; by default the request's
    connect timeout from now); the last one's error when none does.

    Each address is given its share of the time left, so N dead addresses (an unreachable
    IPv6 address listed first drops packets) wait one connect timeout in all, not N; one
    that timed out is tried again, after the others, with what they left (a slow address
    whose siblings refuse at once still has the whole timeout). Tried one after another,
    not raced (RFC 8305 staggers them), as the request's body can be sent once only."""
    if addresses is None:
        return await send(request)
    timeouts = request.extensions.get("timeout", {})
    if deadline is None:
        deadline = deadline_of(request)
    queue = deque((str(a), True) for a in addresses[:MAX_ADDRESSES])
    clock = asyncio.get_running_loop().time
    while True:
        address, again = queue.popleft()
        left = None if deadline is None else max(deadline - clock(), 0)
        connect = None if left is None else left / (len(queue) + 1)
        try:
            return await send(_aimed(request, address, {**timeouts, "connect": connect}))
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            if not queue:
                raise
            if again and isinstance(exc, httpx.ConnectTimeout):  # slow, not refused
                queue.append((address, False))


def _aimed(
    request: httpx.Request, address: str, timeouts: Mapping[str, float | None]
) -> httpx.Request:
    """*request* sent to *address* within *timeouts*: its ``Host`` header stays the name's,
    as httpx made it, and over TLS the name is the SNI the certificate is verified for."""
    url = request.url
    extensions = {**request.extensions, "timeout": timeouts}
    if url.scheme == "https" and url.host != address:
        extensions["sni_hostname"] = url.raw_host.decode("ascii")
    return httpx.Request(
        request.method,
        url.copy_with(host=address),
        headers=request.headers,
        stream=request.stream,
        extensions=extensions,
    )
