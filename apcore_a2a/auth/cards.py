"""Security on the agent card and ACL-aware skill lists (public and per caller).

Skill ids are apcore module ids, so "may this caller see skill S" is the apcore ACL
question "may this identity call module S", asked without executing anything.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import (
    AgentCard,
    GetExtendedAgentCardRequest,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.errors import A2A_ERROR_MAPPING, A2AError
from starlette.responses import JSONResponse
from starlette.routing import Route

from apcore_a2a.adapters.agent_card import CardDocument, serialize_card
from apcore_a2a.errors import UnauthenticatedError
from apcore_a2a.execution.identity import (
    identity_of,
    visible_modules,
    visible_modules_async,
)

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.server.request_handlers import RequestHandler
    from a2a.server.routes.common import ServerCallContextBuilder
    from apcore import Executor
    from starlette.requests import Request

    from apcore_a2a.auth.authenticator import Authenticator

#: The pre-0.3 REST path for the authenticated extended card.
LEGACY_EXTENDED_CARD_PATH = "/agent/authenticatedExtendedCard"


def security_for(
    authenticator: Authenticator | None,
) -> tuple[dict[str, SecurityScheme], list[SecurityRequirement]]:
    """Card ``securitySchemes`` and ``securityRequirements`` for *authenticator*: one
    requirement per scheme, i.e. any one of them is sufficient."""
    schemes = authenticator.security_schemes() if authenticator is not None else {}
    return schemes, [SecurityRequirement(schemes={name: StringList()}) for name in schemes]


def restrict_card(card: AgentCard, skill_ids: Collection[str]) -> AgentCard:
    """A copy of *card* listing only *skill_ids*, also in extension params
    (``params.skills``), so a hidden skill's schema does not leak through an extension."""
    out = AgentCard()
    out.CopyFrom(card)
    del out.skills[:]
    out.skills.extend(s for s in card.skills if s.id in skill_ids)
    for extension in out.capabilities.extensions:
        entry = extension.params.fields.get("skills")
        if entry is not None and entry.HasField("struct_value"):
            for key in [k for k in entry.struct_value.fields if k not in skill_ids]:
                del entry.struct_value.fields[key]
    return out


def acl_card_document(
    executor: Executor, current: Callable[[], CardDocument], *, ttl: float = 60.0
) -> Callable[[], CardDocument]:
    """Wrap a card-document source so it lists only what an anonymous caller may call,
    cached until the source changes or *ttl* seconds pass (ACL reloads show up without an
    ACL check, and its audit entry, on every card fetch)."""
    cached: tuple[CardDocument, CardDocument, float] | None = None

    def document() -> CardDocument:
        nonlocal cached
        source = current()
        now = time.monotonic()
        if cached is not None and cached[0] is source and now - cached[2] < ttl:
            return cached[1]
        skills = [s.id for s in source.card.skills]
        allowed = visible_modules(executor, None, skills)
        filtered = source
        if len(allowed) != len(skills):
            card = restrict_card(source.card, allowed)
            filtered = serialize_card(card, last_modified=source.last_modified)
        if cached is not None and filtered is not source:
            # An ACL reload can change the filtered card while its source stays the same.
            filtered = filtered.replacing(cached[1])
        cached = (source, filtered, now)
        return filtered

    return document


def extended_card_modifier(
    executor: Executor, current: Callable[[], AgentCard] | None = None
) -> Callable[[AgentCard, ServerCallContext], Awaitable[AgentCard]]:
    """An SDK ``extended_card_modifier``: the full card (*current*, else the handler's)
    restricted to the caller's ACL. Anonymous callers are refused (HTTP ones never get
    here: this guards other transports)."""

    async def modify(card: AgentCard, context: ServerCallContext) -> AgentCard:
        identity = identity_of(context)
        if identity is None:
            raise UnauthenticatedError()
        full = current() if current is not None else card
        ids = [s.id for s in full.skills]
        return restrict_card(full, await visible_modules_async(executor, identity, ids))

    return modify


def legacy_extended_card_route(
    handler: RequestHandler, context_builder: ServerCallContextBuilder
) -> Route:
    """``GET /agent/authenticatedExtendedCard``: the caller's extended card as JSON, from
    ``handler.on_get_extended_agent_card`` (the card of ``GetExtendedAgentCard``). Mount it
    only with auth, before the REST routes (their ``/{tenant}`` mount would swallow it)."""

    async def endpoint(request: Request) -> JSONResponse:
        context = context_builder.build(request)
        try:
            card = await handler.on_get_extended_agent_card(GetExtendedAgentCardRequest(), context)
        except A2AError as exc:
            mapping = A2A_ERROR_MAPPING.get(type(exc))
            status = mapping.http_code if mapping is not None else 500
            return JSONResponse({"error": {"code": status, "message": exc.message}}, status)
        headers = {"Cache-Control": "private, no-cache", "Vary": "Authorization"}
        return JSONResponse(agent_card_to_dict(card), headers=headers)

    return Route(LEGACY_EXTENDED_CARD_PATH, endpoint, methods=["GET"])
