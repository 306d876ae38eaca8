"""The verified-token cache never extends a token's life and never shares mutable state."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import httpx
import jwt
import pytest
from apcore import Executor, Identity, Registry
from pydantic import BaseModel

from apcore_a2a import A2AServerFactory
from apcore_a2a.auth import (
    AnyAuthenticator,
    APIKeyAuthenticator,
    ClaimMapping,
    InvalidCredentials,
    JWTAuthenticator,
)
from tests._support import TLS, find_key, running_server, send_message

from .keys import HMAC_SECRET

V1 = {"A2A-Version": "1.0"}


def header(**claims: object) -> dict[str, str]:
    claims.setdefault("exp", int(time.time()) + 600)
    return {"Authorization": "Bearer " + jwt.encode(claims, HMAC_SECRET)}


async def test_cached_token_still_expires_at_exp() -> None:
    auth = JWTAuthenticator(HMAC_SECRET, verified_cache_seconds=3600)
    exp = int(time.time()) + 1
    headers = header(sub="alice", exp=exp)
    assert (await auth.authenticate(headers)).id == "alice"  # type: ignore[union-attr]
    assert (await auth.authenticate(headers)).id == "alice"  # type: ignore[union-attr]
    await asyncio.sleep(max(0.0, exp - time.time()) + 0.05)
    with pytest.raises(InvalidCredentials, match="ExpiredSignature"):
        await auth.authenticate(headers)


async def test_cache_returns_copies() -> None:
    auth = JWTAuthenticator(HMAC_SECRET, verified_cache_size=2)
    headers = header(sub="alice", roles=["admin"])
    first = await auth.authenticate(headers)
    assert first is not None
    first.attrs["tampered"] = True
    second = await auth.authenticate(headers)
    assert second is not None and second is not first
    assert second.attrs == {"auth_scheme": "jwt"}
    for name in ("bob", "carol", "dave", "alice"):
        assert (await auth.authenticate(header(sub=name))).id == name  # type: ignore[union-attr]


async def test_bad_tokens_are_rejected_every_time() -> None:
    cached = JWTAuthenticator(HMAC_SECRET)
    bad = {"Authorization": "Bearer " + jwt.encode({"sub": "m"}, "x" * 40)}
    for _ in range(2):
        with pytest.raises(InvalidCredentials):
            await cached.authenticate(bad)


class Empty(BaseModel):
    pass


class Groups(BaseModel):
    groups: list[str]


class Promote:
    """A module that adds a group to its caller's identity, as a careless module might."""

    input_schema = Empty
    output_schema = Groups
    description = "Report the caller's groups after adding 'admin' to them"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        context.identity.attrs["groups"].append("admin")
        return {"groups": list(context.identity.attrs["groups"])}


async def test_a_module_changing_nested_attrs_changes_no_later_request() -> None:
    # Identities are remembered (the token cache, the API-key table): a copy whose list
    # values were shared let one call's change reach every later call with the credential.
    registry = Registry()
    registry.register("demo.promote", Promote())
    key = "k-" + secrets.token_hex(16)
    auth = AnyAuthenticator(
        [
            JWTAuthenticator(HMAC_SECRET, claim_mapping=ClaimMapping(attrs=("groups",))),
            APIKeyAuthenticator({key: Identity(id="svc", attrs={"groups": ["staff"]})}),
        ]
    )
    app, _ = A2AServerFactory(Executor(registry), environ={}, auth=auth).create()
    token = header(sub="alice", groups=["staff"])
    async with running_server(app) as base, httpx.AsyncClient(verify=TLS) as http:
        for credentials in (token, {"X-API-Key": key}):
            for n in range(3):
                send = send_message("demo.promote", {}, message_id=f"m-{n}")
                sent = await http.post(base + "/", json=send, headers={**credentials, **V1})
                answer = sent.json()
                assert find_key(answer, "groups") == [["staff", "admin"]], (
                    find_key(answer, "groups"),
                    n,
                )


class Depth(BaseModel):
    depth: int


class MeasureTenant:
    """A module reporting how deep its caller's ``tenant`` claim is nested."""

    input_schema = Empty
    output_schema = Depth
    description = "Report the nesting depth of the caller's tenant claim"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        depth, value = 0, context.identity.attrs["tenant"]
        while isinstance(value, list):
            depth, value = depth + 1, value[0]
        return {"depth": depth}


async def test_a_deeply_nested_claim_is_copied_for_every_request() -> None:
    # A claim nested 600 deep parses (PyJWT's json), but the per-request copy recursed two
    # frames a level: RecursionError out of authenticate, a 500 for the caller's token.
    registry = Registry()
    registry.register("demo.tenant", MeasureTenant())
    auth = JWTAuthenticator(HMAC_SECRET, claim_mapping=ClaimMapping(attrs=("tenant",)))
    app, _ = A2AServerFactory(Executor(registry), environ={}, auth=auth).create()
    tenant = "[" * 600 + "[1]" + "]" * 600  # json.dumps would recurse as deep
    claims = f'{{"sub":"alice","exp":{int(time.time()) + 600},"tenant":{tenant}}}'
    token = jwt.api_jws.encode(claims.encode(), HMAC_SECRET, algorithm="HS256")
    headers = {"Authorization": "Bearer " + token, **V1}
    async with running_server(app) as base, httpx.AsyncClient(verify=TLS) as http:
        for n in range(2):  # verified, then remembered
            send = send_message("demo.tenant", {}, message_id=f"m-{n}")
            sent = await http.post(base + "/", json=send, headers=headers)
            assert sent.status_code == 200, (n, sent.status_code, sent.text[:300])
            assert find_key(sent.json(), "depth") == [601], (n, sent.text[:300])


class Fingerprint(bytes):
    """A bytes value of the application's own kind (its own methods, its own repr)."""


class Kinds(BaseModel):
    kinds: list[str]
    tags: list[str]


class TagSelf:
    """A module reporting its caller's attrs' types, and its tags before adding one."""

    input_schema = Empty
    output_schema = Kinds
    description = "Report the types of the caller's attrs, then tag the caller"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        attrs = context.identity.attrs
        tags = sorted(attrs["tags"])
        attrs["tags"].add("seen")
        kinds = sorted(f"{n}={type(v).__name__}" for n, v in attrs.items() if n != "tags")
        return {"kinds": kinds, "tags": tags}


async def test_an_applications_attrs_keep_their_types_and_sets_are_copied() -> None:
    # The per-request copy (marshal) wrote a bytes subclass and a bytearray back as plain
    # bytes; and once an attr marshal refuses (an object of the application's) sent the copy
    # to Python, a set there was shared: a module's change reached every later request.
    registry = Registry()
    registry.register("demo.tag", TagSelf())
    keys = {
        "k-buffers-" + secrets.token_hex(8): {
            "cert": Fingerprint(b"\x01\x02"),
            "buffer": bytearray(b"ab"),
            "tags": {"staff"},
        },
        "k-objects-" + secrets.token_hex(8): {"owner": Empty(), "tags": {"staff"}},
    }
    auth = APIKeyAuthenticator({k: Identity(id="svc", attrs=a) for k, a in keys.items()})
    app, _ = A2AServerFactory(Executor(registry), environ={}, auth=auth).create()
    expected = {
        "buffers": ["auth_scheme=str", "buffer=bytearray", "cert=Fingerprint"],
        "objects": ["auth_scheme=str", "owner=Empty"],
    }
    async with running_server(app) as base, httpx.AsyncClient(verify=TLS) as http:
        for key in keys:
            for n in range(2):
                send = send_message("demo.tag", {}, message_id=f"m-{n}")
                sent = await http.post(base + "/", json=send, headers={"X-API-Key": key, **V1})
                answer = (find_key(sent.json(), "kinds"), find_key(sent.json(), "tags"))
                assert answer == ([expected[key.split("-")[1]]], [["staff"]]), (key, n, answer)


class TagPair:
    """A module reporting the list inside its caller's ``pair`` tuple, then adding to it."""

    input_schema = Empty
    output_schema = Kinds
    description = "Report the list in the caller's pair, then tag it"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        tags = context.identity.attrs["pair"][1]
        seen = list(tags)
        tags.append("seen")
        return {"kinds": [type(context.identity.attrs["pair"]).__name__], "tags": seen}


async def test_a_list_inside_a_tuple_is_copied_beside_an_applications_object() -> None:
    # With an attr marshal refuses (an object of the application's), the copy is made in
    # Python: it copied dicts, lists and sets but shared a tuple whole, so the list inside
    # it was one for every request: a module's change reached the next caller.
    registry = Registry()
    registry.register("demo.pair", TagPair())
    key = "k-pair-" + secrets.token_hex(8)
    attrs = {"owner": Empty(), "pair": ("role", ["staff"])}
    auth = APIKeyAuthenticator({key: Identity(id="svc", attrs=attrs)})
    app, _ = A2AServerFactory(Executor(registry), environ={}, auth=auth).create()
    async with running_server(app) as base, httpx.AsyncClient(verify=TLS) as http:
        for n in range(2):
            send = send_message("demo.pair", {}, message_id=f"m-{n}")
            sent = await http.post(base + "/", json=send, headers={"X-API-Key": key, **V1})
            answer = (find_key(sent.json(), "kinds"), find_key(sent.json(), "tags"))
            assert answer == ([["tuple"]], [["staff"]]), (n, answer)
