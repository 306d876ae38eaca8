"""Optional parts of an agent, plugged into the factory through one small interface.

A :class:`Feature` brings routes, middleware at a named place in the stack, and a
start/stop pair the app's lifecycle runs (in order, and in reverse on the way down). The
factory builds the features the settings ask for and never special-cases one of them.

Middleware places, outermost first: :data:`EDGE` -- app-wide, before routing (trusted
hosts, CORS); then on every route, once Starlette matched it (after the request record,
see :mod:`apcore_a2a.classify`): :data:`OBSERVE` -- telemetry spans, request counters;
:data:`AUTH` -- who is calling; :data:`GUARD` -- the request guard; :data:`INNER` --
between the guard and the endpoint (response shaping).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import BaseRoute

if TYPE_CHECKING:
    from apcore_a2a.settings import Settings

__all__ = ["AUTH", "EDGE", "GUARD", "INNER", "OBSERVE", "Feature", "host_feature"]

EDGE, OBSERVE, AUTH, GUARD, INNER = 10, 20, 30, 40, 50
#: scope extension set by ``A2AClient(app=...)`` (kept in step with apcore_a2a.client)
IN_PROCESS = "apcore_a2a.in_process"

Hook = Callable[[], Awaitable[None]]


@dataclass
class Feature:
    """One optional part of the agent (see the module docstring)."""

    name: str
    routes: Sequence[BaseRoute] = ()
    #: (place, middleware) pairs; the place is one of EDGE, OBSERVE, AUTH, INNER
    middleware: Sequence[tuple[int, Middleware]] = ()
    start: Hook | None = None
    stop: Hook | None = None
    #: the feature's own object (a push kit, a gRPC server...), for operations to read
    handle: Any = None


def middleware_stack(
    features: Iterable[Feature], core: Sequence[tuple[int, Middleware]]
) -> tuple[list[Middleware], list[Middleware]]:
    """(app-wide, per-route) middleware, each outermost first: by place, then as given."""
    entries = sorted([*core, *(e for f in features for e in f.middleware)], key=lambda e: e[0])
    return [m for p, m in entries if p <= EDGE], [m for p, m in entries if p > EDGE]


def host_feature(settings: Settings) -> Feature | None:
    """Refuse ``Host`` headers the agent does not answer to (DNS rebinding) with 400."""
    hosts = allowed_hosts(settings)
    if hosts is None:
        return None
    return Feature("allowed-hosts", middleware=[(EDGE, Middleware(HostCheck, allowed_hosts=hosts))])


class HostCheck:
    """Starlette's ``TrustedHostMiddleware``, except for calls made in this process
    (``A2AClient(app=...)``: no socket, so no browser in between, whatever Host it names)."""

    def __init__(self, app: Any, *, allowed_hosts: Sequence[str]) -> None:
        self.app = app
        self.checked = TrustedHostMiddleware(app, allowed_hosts=allowed_hosts)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if IN_PROCESS in (scope.get("extensions") or {}):
            await self.app(scope, receive, send)
        else:
            await self.checked(scope, receive, send)


def allowed_hosts(settings: Settings) -> list[str] | None:
    """The Host names to answer, or ``None`` for any (a bind on every interface, no url)."""
    if settings.allowed_hosts:
        return None if "*" in settings.allowed_hosts else list(settings.allowed_hosts)
    # "testserver" is the name Starlette's TestClient sends; it resolves nowhere, so it
    # opens no door to DNS rebinding.
    hosts = {"localhost", "127.0.0.1", "[::1]", "::1", "testserver"}
    if settings.url:
        name = urlsplit(settings.url).hostname
        if name:
            hosts.add(name)
    elif settings.host in ("0.0.0.0", "::", ""):
        return None
    else:
        hosts.add(settings.host)
    return sorted(hosts)
