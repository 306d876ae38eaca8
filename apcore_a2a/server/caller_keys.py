"""How a call's caller is keyed for quotas, on every binding: :class:`CallerKeys`, built
once from the settings, so each layer takes one parameter.

Anonymous callers are counted by address (``ip:<address>``; IPv6 by network). Over HTTP,
uvicorn takes it from ``X-Forwarded-For`` when the peer is one of ``forwarded_allow_ips``
(``_runner.py``); behind an L7 gRPC proxy (Envoy, nginx ``grpc_pass``, Caddy) the peer is
the proxy, so without the same rule every anonymous gRPC caller would share one key and
one caller's quota would refuse all the others.

The rule is uvicorn's own, applied by its public ``ProxyHeadersMiddleware`` to the call
as a scope of the peer and the ``x-forwarded-for`` metadata: the right-most address that
is not a trusted proxy (the left-most when every hop is trusted, or with ``*``); networks
and ``*`` as uvicorn reads them. One rule for both ports: a proxy trusted on one is trusted
the same way on the other, and uvicorn's fixes reach both. That holds where the agent runs
both servers (``serve()``, the CLI); under a server of your own (an app you mount, or run
with uvicorn yourself) HTTP's addresses are that server's, and the setting reaches the
gRPC port only: :func:`own_server_note` says so at start. (grpc names an IPv4 peer of a
port bound on ``::`` by its IPv4 address, as uvicorn does: the addresses compare alike.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from apcore_a2a.execution.identity import (
    IPV6_CALLER_PREFIX,
    AnonymousCaller,
    caller_identity,
    caller_key,
)

if TYPE_CHECKING:
    import grpc.aio
    from apcore import Identity

    from apcore_a2a.settings import Settings

#: the gRPC metadata key (grpc lowercases keys) of the forwarded addresses
FORWARDED_FOR = "x-forwarded-for"


async def _untouched(scope: Any, receive: Any, send: Any) -> None:
    """The app behind the middleware: the scope it was handed is the answer."""


async def _nothing(*_message: Any) -> Any:  # pragma: no cover - never called
    """The receive and send of the scope: the middleware neither receives nor sends."""


class CallerKeys:
    """The key quotas count a call's caller by
    (:func:`~apcore_a2a.execution.identity.caller_key`): the task owner, or an anonymous
    caller's address, an IPv6 one as its network of *ipv6_prefix* bits; on the gRPC port,
    from a *trusted* proxy (``forwarded_allow_ips``: addresses, networks, ``*``), the
    address its ``x-forwarded-for`` names. No trusted proxy (``()``, the default) is the
    one spelling of "no proxy".

    Example::

        keys = CallerKeys(64, ["10.0.0.5"])
        await keys.address("10.0.0.5", ["198.51.100.7, 203.0.113.9"])  # "203.0.113.9"
        await keys.address("192.0.2.1", ["203.0.113.9"])  # "192.0.2.1": not a proxy
    """

    def __init__(
        self,
        ipv6_prefix: int = IPV6_CALLER_PREFIX,
        trusted: Sequence[str] = (),
        apart: bool = False,
    ) -> None:
        self.ipv6_prefix = ipv6_prefix
        self._rule = ProxyHeadersMiddleware(_untouched, list(trusted)) if trusted else None
        #: anonymous callers own their tasks by their key (the agent authenticates others)
        self.apart = apart

    @classmethod
    def of(cls, settings: Settings, apart: bool = False) -> CallerKeys:
        """The keys *settings* ask for (``ipv6_caller_prefix``, ``forwarded_allow_ips``);
        *apart*: anonymous callers are kept apart by their key (:meth:`anonymous`)."""
        return cls(settings.ipv6_caller_prefix, settings.forwarded_allow_ips, apart)

    def anonymous(self, key: str) -> AnonymousCaller | None:
        """Who the anonymous caller keyed *key* is to the stores: the owner of its key when
        callers are kept :attr:`apart`; ``None``, the SDK's one anonymous owner, when the
        agent authenticates nobody (single-tenant: docs/auth.md)."""
        return AnonymousCaller(key) if self.apart else None

    def of_scope(self, scope: Mapping[str, Any]) -> str:
        """The key of an HTTP request's caller (uvicorn has applied the proxy rule to the
        scope's ``client``)."""
        client = scope.get("client")
        return caller_key(caller_identity(scope), client[0] if client else None, self.ipv6_prefix)

    async def of_call(self, identity: Identity | None, context: grpc.aio.ServicerContext) -> str:
        """The key of a gRPC call's caller: *identity*'s owner, or the peer's address (a
        trusted proxy's: the one it forwards)."""
        if identity is not None:
            return caller_key(identity, None, self.ipv6_prefix)
        # grpc's peer is a URI: "ipv4:127.0.0.1:53422", "ipv6:%5B::1%5D:53422" (quoted)
        peer = unquote(str(context.peer() or "unknown"))
        kind, _, rest = peer.partition(":")
        address = (rest.rsplit(":", 1)[0] if kind in ("ipv4", "ipv6") else peer).strip("[]")
        address = await self.address(address, forwarded_values(context.invocation_metadata()))
        return caller_key(None, address, self.ipv6_prefix)

    async def address(self, peer: str, forwarded: Iterable[str]) -> str:
        """The address of the caller of a call from *peer* whose ``x-forwarded-for``
        values are *forwarded*: *peer* unless it is a trusted proxy."""
        values = [value.encode("latin-1", "replace") for value in forwarded]
        if self._rule is None or not values:
            return peer
        scope: dict[str, Any] = {
            "type": "http",
            "client": (peer, 0),
            "headers": [(FORWARDED_FOR.encode(), value) for value in values],
        }
        await self._rule(scope, _nothing, _nothing)  # type: ignore[arg-type]
        return str(scope["client"][0])


def forwarded_values(metadata: Iterable[tuple[str, str | bytes]] | None) -> list[str]:
    """The ``x-forwarded-for`` values of a gRPC call's invocation *metadata*, in order."""
    return [
        value
        for key, value in metadata or ()
        if key.lower() == FORWARDED_FOR and isinstance(value, str)
    ]


def own_server_note(settings: Settings) -> str | None:
    """What an agent run under a server of its operator's own (mounted, or
    ``async_serve()``'s app under their uvicorn) tells them at start about a
    ``forwarded_allow_ips`` they set: that server reads HTTP callers' addresses by its own
    rule, so the setting reaches the gRPC port only (``None``: nothing set, nothing to say).
    """
    if not settings.forwarded_allow_ips:
        return None
    trusted = ", ".join(settings.forwarded_allow_ips)
    http = (
        "HTTP callers' addresses are read by the server this app runs under (uvicorn: "
        "--forwarded-allow-ips, 127.0.0.1 and ::1 unless told otherwise)"
    )
    if settings.grpc_port is None:
        return f"forwarded_allow_ips ({trusted}) has no effect: no gRPC port, and {http}"
    return (
        f"forwarded_allow_ips ({trusted}) is read by the gRPC port only: {http}; "
        "trust the same proxies there"
    )
