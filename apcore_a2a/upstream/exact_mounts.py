"""A mount of the SDK's REST routes (``/{tenant}``, 0.3's ``/v1``) claims a path only when
one of its routes takes the rest of it.

a2a-sdk 1.3 mounts its REST routes under ``Mount("/{tenant}")``, and a Starlette mount
matches every path below it. Starlette's router hands a path to the first route that
matches it fully, and keeps a route that matches all but the method only for when none
does: so the tenant mount takes ``POST /.well-known/agent-card.json`` and answers 404
where the card's route would answer 405 with its ``Allow``; and, as the mount matches any
``/x/``, the slash redirects of a router find ``/typo/`` for every one-segment typo.

An :class:`ExactMount` that no route of its own would take (not even with another method)
does not match, and the router goes on: to the route that takes the method elsewhere
(405), or to its 404.
"""

from __future__ import annotations

from starlette.routing import Match, Mount
from starlette.types import Scope


class ExactMount(Mount):
    """A ``Mount`` of *routes* that matches a path only when one of *routes* does."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is not Match.FULL:
            return match, child
        below = {**scope, **child}
        if any(route.matches(below)[0] is not Match.NONE for route in self.routes):
            return match, child
        return Match.NONE, {}
