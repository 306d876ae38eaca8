"""Helpers other parts call directly: gRPC metadata, card restriction, ACL-aware documents."""

from __future__ import annotations

import time

import jwt
import pytest
from a2a.server.context import ServerCallContext
from a2a.types import AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill
from apcore import ACLRule, Identity
from google.protobuf.struct_pb2 import Struct

from apcore_a2a.adapters.agent_card import serialize_card
from apcore_a2a.auth import (
    APIKeyAuthenticator,
    InvalidCredentials,
    JWTAuthenticator,
    acl_card_document,
    extended_card_modifier,
    identity_from_metadata,
    restrict_card,
    security_for,
    visible_modules,
)
from apcore_a2a.errors import UnauthenticatedError
from apcore_a2a.execution.identity import Caller

from .agent import build_executor
from .keys import HMAC_SECRET


async def test_identity_from_grpc_metadata() -> None:
    auth = JWTAuthenticator(HMAC_SECRET)
    token = jwt.encode(
        {"sub": "grpc-user", "roles": ["admin"], "exp": int(time.time()) + 600}, HMAC_SECRET
    )
    metadata = [
        ("user-agent", "grpc-python"),
        ("trace-bin", b"\x00\x01"),
        ("authorization", f"Bearer {token}"),
    ]
    identity = await identity_from_metadata(auth, metadata)
    assert identity == Identity(id="grpc-user", roles=("admin",), attrs={"auth_scheme": "jwt"})
    assert await identity_from_metadata(auth, None) is None
    assert await identity_from_metadata(auth, [("x-other", "1")]) is None
    with pytest.raises(InvalidCredentials):
        await identity_from_metadata(auth, [("authorization", "Bearer nope")])
    keys = APIKeyAuthenticator({"k-0123456789abcdef": "svc"})
    who = await identity_from_metadata(keys, [("x-api-key", "k-0123456789abcdef")])
    assert who is not None and who.id == "svc"


def card_with(*ids: str) -> AgentCard:
    params = Struct()
    params.update({"skills": {i: {"inputSchema": {"type": "object"}} for i in ids}, "v": 1})
    return AgentCard(
        name="t",
        description="t",
        version="1",
        supported_interfaces=[
            AgentInterface(url="http://x/", protocol_binding="JSONRPC", protocol_version=v)
            for v in ("1.0", "0.3")
        ],
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        capabilities=AgentCapabilities(
            extensions=[AgentExtension(uri="urn:x", params=params), AgentExtension(uri="urn:y")]
        ),
        skills=[AgentSkill(id=i, name=i, description=i, tags=["t"]) for i in ids],
    )


def test_restrict_card_drops_skills_and_their_extension_entries() -> None:
    card = card_with("a.one", "b.two", "c.three")
    out = restrict_card(card, {"a.one", "c.three"})
    assert [s.id for s in out.skills] == ["a.one", "c.three"]
    params = out.capabilities.extensions[0].params
    assert set(params["skills"].keys()) == {"a.one", "c.three"}
    assert params["v"] == 1
    assert [s.id for s in card.skills] == ["a.one", "b.two", "c.three"], "input untouched"


def test_security_for_without_and_with_auth() -> None:
    assert security_for(None) == ({}, [])
    schemes, requirements = security_for(APIKeyAuthenticator({"k-0123456789abcdef": "x"}))
    assert schemes["apiKey"].api_key_security_scheme.name == "X-API-Key"
    assert schemes["apiKey"].api_key_security_scheme.location == "header"
    assert [list(r.schemes) for r in requirements] == [["apiKey"]]


def test_visible_modules_follow_roles_and_acl_changes() -> None:
    executor = build_executor()
    ids = ["demo.add", "demo.wait", "admin.reset"]
    assert visible_modules(executor, None, ids) == {"demo.add", "demo.wait"}
    viewer = Identity(id="v", roles=("viewer",))
    admin = Identity(id="a", roles=("admin",))
    assert visible_modules(executor, viewer, ids) == {"demo.add", "demo.wait"}
    assert visible_modules(executor, admin, ids) == set(ids)


def test_acl_card_document_caches_per_source_and_follows_acl_after_ttl() -> None:
    executor = build_executor()
    source = serialize_card(card_with("demo.add", "admin.reset"))
    current = acl_card_document(executor, lambda: source, ttl=0.0)
    first = current()
    assert [s.id for s in first.card.skills] == ["demo.add"]
    assert b"admin.reset" not in first.body
    # An ACL change (here: everyone may reset) shows once the cached copy expires.
    executor._acl.add_rule(  # type: ignore[union-attr]
        ACLRule(callers=["@external"], targets=["admin.reset"], effect="allow")
    )
    assert [s.id for s in current().card.skills] == ["demo.add", "admin.reset"]
    cached = acl_card_document(executor, lambda: source, ttl=3600)
    assert cached() is cached()


async def test_extended_card_modifier_refuses_anonymous_and_uses_the_current_card() -> None:
    executor = build_executor()
    live = card_with("demo.add", "admin.reset")
    modify = extended_card_modifier(executor, lambda: live)
    stale = card_with("demo.add")
    with pytest.raises(UnauthenticatedError):
        await modify(stale, ServerCallContext())
    admin = ServerCallContext(user=Caller(Identity(id="a", roles=("admin",))))
    assert [s.id for s in (await modify(stale, admin)).skills] == ["demo.add", "admin.reset"]
    viewer = ServerCallContext(user=Caller(Identity(id="v")))
    assert [s.id for s in (await modify(stale, viewer)).skills] == ["demo.add"]
