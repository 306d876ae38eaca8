"""``A2AClient(verify_card=True)``: signed cards accepted, missing/tampered/foreign refused.

The agent is our server with card signing on (uvicorn on 127.0.0.1). Tampering happens in
a real proxy in front of it that changes one byte of the card on the way.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from apcore_a2a.client import A2AClient, A2ADiscoveryError, CardVerificationError
from tests._support import TLS, running_server, threaded_server
from tests.client._apcore_agent import build_our_app

from ._stub_agent import CARD_V10, StubAgent

SECRET = "card-verify-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def signed_agent() -> Iterator[str]:
    from tests._support import free_port

    port = free_port()
    with threaded_server(build_our_app(port, card_signing=True), port=port) as url:
        yield url


@contextlib.asynccontextmanager
async def tampering_proxy(
    upstream: str, change: Callable[[dict[str, Any]], None]
) -> AsyncIterator[str]:
    """Serves the upstream card with *change* applied, and the upstream key set as is."""

    async def card(request: Request) -> Response:
        async with httpx.AsyncClient(verify=TLS) as http:
            document = (await http.get(upstream + "/.well-known/agent-card.json")).json()
        change(document)
        return Response(json.dumps(document), media_type="application/json")

    async def jwks(request: Request) -> Response:
        async with httpx.AsyncClient(verify=TLS) as http:
            upstream_keys = await http.get(upstream + "/.well-known/jwks.json")
        return Response(upstream_keys.content, media_type="application/json")

    app = Starlette(
        routes=[
            Route("/.well-known/agent-card.json", card),
            Route("/.well-known/jwks.json", jwks),
        ]
    )
    async with running_server(app) as url:
        yield url


async def test_a_signed_card_verifies_and_the_client_uses_the_signed_view(
    signed_agent: str,
) -> None:
    async with A2AClient(signed_agent, verify_card=True) as client:
        card = await client.discover()
        task = await client.send_message({"a": 2, "b": 3}, skill_id="demo.add")
    assert card["signatures"] and card["name"]
    assert "url" not in card and "preferredTransport" not in card, "0.3 keys are unsigned"
    assert task["status"]["state"] == "completed"


def describe(card: dict[str, Any]) -> None:
    card["skills"][0]["description"] = card["skills"][0]["description"][:-1] + "!"


def second_interface_port(card: dict[str, Any]) -> None:
    iface = card["supportedInterfaces"][0]
    iface["url"] = iface["url"].replace("127.0.0.1", "127.0.0.2")


def security_copy(card: dict[str, Any]) -> None:
    # Only the 1.0 copy of a security scheme: the a2a-sdk's own reader ignores it.
    for scheme in card.get("securitySchemes", {}).values():
        for inner in scheme.values():
            if isinstance(inner, dict):
                inner["description"] = "changed"


def strip(card: dict[str, Any]) -> None:
    del card["signatures"]


@pytest.mark.parametrize(
    ("change", "reason"),
    [(describe, "invalid"), (second_interface_port, "invalid"), (strip, "missing")],
    ids=["skill-description", "interface-url", "signature-removed"],
)
async def test_changed_or_unsigned_cards_are_refused(
    signed_agent: str, change: Callable[[dict[str, Any]], None], reason: str
) -> None:
    async with tampering_proxy(signed_agent, change) as proxy:
        for protocol in ("auto", "1.0"):
            async with A2AClient(proxy, verify_card=True, protocol=protocol) as client:  # type: ignore[arg-type]
                with pytest.raises(CardVerificationError) as err:
                    await client.send_message("hi", skill_id="demo.echo")
            assert err.value.reason == reason
            assert isinstance(err.value, A2ADiscoveryError)
        # Without verification the same card is taken as it is.
        async with A2AClient(proxy) as plain:
            assert (await plain.discover())["name"]


@pytest.fixture(scope="module")
def signed_jwt_agent() -> Iterator[str]:
    """A signed agent with JWT auth: a security scheme on the card, and an extended card."""
    from tests._support import free_port

    port = free_port()
    app = build_our_app(port, card_signing=True, auth_key=SECRET, require_auth=False)
    with threaded_server(app, port=port) as url:
        yield url


async def test_a_change_to_the_strict_1_0_copy_of_a_field_is_refused_too(
    signed_jwt_agent: str,
) -> None:
    async with (
        tampering_proxy(signed_jwt_agent, security_copy) as proxy,
        A2AClient(proxy, verify_card=True) as client,
    ):
        with pytest.raises(CardVerificationError, match="changed after"):
            await client.discover()


async def test_the_extended_card_is_verified(signed_jwt_agent: str) -> None:
    token = jwt.encode({"sub": "ann", "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")
    async with A2AClient(signed_jwt_agent, auth=token, verify_card=True) as client:
        extended = await client.get_extended_card()
    assert extended["signatures"] and extended["capabilities"]["extendedAgentCard"] is True
    assert "url" not in extended


async def test_keys_given_by_the_caller(signed_agent: str) -> None:
    async with httpx.AsyncClient(verify=TLS) as http:
        jwks = (await http.get(signed_agent + "/.well-known/jwks.json")).json()
    async with A2AClient(signed_agent, card_keys=jwks) as pinned:
        assert (await pinned.discover())["signatures"]
    other = ec.generate_private_key(ec.SECP256R1()).public_key()
    pem = other.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    async with A2AClient(signed_agent, card_keys=pem) as wrong_pem:
        with pytest.raises(CardVerificationError) as err:
            await wrong_pem.discover()
    assert err.value.reason == "invalid"
    foreign = {"keys": [{**jwks["keys"][0], "kid": "someone-else"}]}
    async with A2AClient(signed_agent, card_keys=foreign) as wrong_kid:
        with pytest.raises(CardVerificationError) as err:
            await wrong_kid.discover()
    assert err.value.reason == "unknown_key"


@pytest.mark.parametrize(
    "keys",
    ["not a pem", {"keys": []}, {"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "x"}]}],
    ids=["garbage", "empty", "shared-secret"],
)
def test_unusable_caller_keys_fail_at_construction(keys: Any) -> None:
    with pytest.raises((ValueError, CardVerificationError)):
        A2AClient("http://agent.local", card_keys=keys)


async def test_a_pinned_protocol_does_not_skip_verification_when_the_card_is_missing() -> None:
    stub = StubAgent(card_paths=())
    async with (
        running_server(stub) as url,
        A2AClient(url, verify_card=True, protocol="1.0") as client,
    ):
        with pytest.raises(A2ADiscoveryError, match="no agent card"):
            await client.get_task("t-1")
    assert [s.method for s in stub.seen] == ["GET", "GET"], "no call without a verified card"


async def test_an_unsigned_agent_and_an_agent_without_keys() -> None:
    unsigned = StubAgent()
    async with running_server(unsigned) as url, A2AClient(url, verify_card=True) as client:
        with pytest.raises(CardVerificationError) as err:
            await client.discover()
    assert err.value.reason == "missing"
    card = dict(CARD_V10, signatures=[{"protected": "eyJraWQiOiJrMSJ9", "signature": "AA"}])
    keyless = StubAgent(card=card)
    async with running_server(keyless) as url, A2AClient(url, verify_card=True) as client:
        with pytest.raises(CardVerificationError) as err:
            await client.discover()
    assert err.value.reason == "no_keys"
