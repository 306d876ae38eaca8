"""The optional parts an agent's settings ask for, built as :class:`Feature` objects.

Each function returns a ready feature (or ``None`` when the settings do not ask for it);
:func:`optional_features` lists them in start order. The factory adds what comes back,
without knowing what any of them is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.routing import BaseRoute

from apcore_a2a.auth import legacy_extended_card_route, security_middleware
from apcore_a2a.classify import JWKS_PATH
from apcore_a2a.errors import MissingExtraError
from apcore_a2a.keys import CardSigner, jwks_route
from apcore_a2a.server.features import (
    AUTH,
    EDGE,
    INNER,
    OBSERVE,
    Feature,
    explorer_feature,
    grpc_feature,
    host_feature,
)

if TYPE_CHECKING:
    from apcore_a2a.server.call_context import ApCoreCallContextBuilder
    from apcore_a2a.server.state import ServerState
    from apcore_a2a.storage import Stores

__all__ = ["grpc_binding", "optional_features"]


def optional_features(
    state: ServerState,
    *,
    authenticator: Any,
    push: Any,
    signer: CardSigner | None,
    context_builder: ApCoreCallContextBuilder,
) -> list[Feature]:
    """The optional parts the settings ask for, in start order."""
    s = state.settings
    ops = state.ops
    found: list[Feature | None] = [
        host_feature(s),
        Feature(
            "operations", routes=ops.routes(), middleware=[(OBSERVE, m) for m in ops.middleware()]
        ),
    ]
    cors, auth = security_middleware(s, authenticator)
    if cors is not None:
        found.append(Feature("cors", middleware=[(EDGE, cors)]))
    if auth is not None:
        found.append(
            Feature(
                "auth",
                routes=[legacy_extended_card_route(state.handler, context_builder)],
                middleware=[(AUTH, auth)],
                # Ends a JWKS fetch in flight; drain() calls it first (see ops.shutdown).
                stop=getattr(authenticator, "aclose", None),
                handle=authenticator,
            )
        )
    if signer is not None:
        found.append(card_signing_feature(signer, state.stores, push))
    if push is not None:
        found.append(push_feature(push, state, context_builder, signed=signer is not None))
    if s.grpc_port is not None:
        server = grpc_binding().GrpcServer(
            state.handler,
            s,
            authenticator=authenticator,
            streams=state.streams,
            operations=state.ops,
        )
        found.append(grpc_feature(server))
    found.append(explorer_feature(s))
    return [f for f in found if f is not None]


def push_feature(
    push: Any, state: ServerState, context_builder: ApCoreCallContextBuilder, *, signed: bool
) -> Feature:
    """Push delivery: its routes and response shaping, started and stopped with the app."""
    routes = push.routes_for(state.handler, context_builder)
    return Feature(
        "push",
        # With card signing one key set serves both keys (the card-signing feature's).
        routes=[r for r in routes if not (signed and _is_jwks(r))],
        middleware=[(INNER, m) for m in push.middleware],
        start=push.start,
        stop=push.aclose,
        handle=push,
    )


def card_signing_feature(signer: CardSigner, stores: Stores, push: Any) -> Feature:
    """Signed cards: the key is loaded at start; ``/.well-known/jwks.json`` has every key."""

    def push_key() -> dict[str, Any] | None:
        key = push.signing_key if push is not None else None
        return dict(key.public_jwk) if key is not None else None

    async def start() -> None:
        await signer.start(stores.engine)

    return Feature(
        "card-signing",
        routes=[jwks_route([signer.public_jwk, push_key])],
        start=start,
        handle=signer,
    )


def _is_jwks(route: BaseRoute) -> bool:
    return getattr(route, "path", None) == JWKS_PATH


def grpc_binding() -> Any:
    """The gRPC binding module; ``MissingExtraError`` naming the extra when grpcio is missing."""
    try:
        from apcore_a2a.server import grpc as binding
    except ImportError as exc:
        raise MissingExtraError(str(exc)) from exc
    return binding
