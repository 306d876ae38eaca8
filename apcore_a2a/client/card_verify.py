"""Verify an agent card's signature (A2A 1.0 ``signatures``) with a2a-sdk's verifier.

The keys are the caller's (a JWKS, one JWK or a PEM public key) or the agent's own
``/.well-known/jwks.json``, never the ``jku`` a card names: a card cannot choose who vouches
for it. A served card may carry a field twice (1.0 and a 0.3 copy), so the card is verified
as the SDK client reads it *and* as a strict 1.0 reader does: a change to either copy fails.
The card handed back is the signed view (1.0 fields only).
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import jwt
from a2a.client.card_resolver import parse_agent_card
from a2a.types import AgentCard
from a2a.utils.signing import (
    NoSignatureError,
    SignatureVerificationError,
    create_signature_verifier,
)
from google.protobuf.json_format import MessageToDict, ParseDict

from apcore_a2a.client.errors import A2AConnectionError, CardVerificationError

#: Where an apcore-a2a agent (and many others) publishes its public keys.
JWKS_PATH = "/.well-known/jwks.json"
#: A key set is a few kB; refuse to read much more.
_MAX_JWKS_BYTES = 512 * 1024
#: Asymmetric algorithms only: a card signed with a shared secret proves nothing.
ALGORITHMS = [f"{family}{bits}" for family in ("ES", "RS", "PS") for bits in (256, 384, 512)]
ALGORITHMS.append("EdDSA")

#: A JWKS (``{"keys": [...]}``), one JWK, a list of JWKs, or a PEM public key.
CardKeys = Mapping[str, Any] | Sequence[Mapping[str, Any]] | str | bytes


def _kid(signature: Any) -> Any:
    with contextlib.suppress(jwt.PyJWTError, AttributeError, TypeError):
        return jwt.get_unverified_header(str(signature.get("protected", "")) + "..").get("kid")
    return None


class CardVerifier:
    """Checks card signatures for one agent; keys are loaded once and refreshed on a miss."""

    def __init__(
        self, http: httpx.AsyncClient, base_url: str, keys: CardKeys | None = None
    ) -> None:
        self._http = http
        self._jwks_url = base_url.rstrip("/") + JWKS_PATH
        self._given = keys
        # Keys the caller gives are checked now, so a bad one fails where it is configured.
        self._keys: dict[str | None, Any] | None = _parse_keys(keys) if keys is not None else None

    async def verify(self, card: Mapping[str, Any]) -> dict[str, Any]:
        """The signed view of *card*; raise :class:`CardVerificationError` if it does not verify."""
        signatures = card.get("signatures")
        if not isinstance(signatures, list) or not signatures:
            raise CardVerificationError("the agent card is not signed", reason="missing")
        kids = {_kid(s) for s in signatures}
        if self._keys is None or (self._given is None and not any(k in self._keys for k in kids)):
            # First use, or a kid we have not seen: the agent may have rotated its key.
            self._keys = _parse_keys(await self._fetch_jwks())
        keys = self._keys
        try:
            as_sdk_reads = parse_agent_card(copy.deepcopy(dict(card)))
            as_strict_reads = ParseDict(
                copy.deepcopy(dict(card)), AgentCard(), ignore_unknown_fields=True
            )
        except Exception as exc:  # a card the SDK cannot even parse has nothing to verify
            raise CardVerificationError(
                f"the agent card cannot be read for verification: {type(exc).__name__}",
                reason="invalid",
            ) from None

        def provider(kid: str | None, jku: str | None) -> Any:
            key = keys.get(kid) if kid in keys else keys.get(None)
            if key is None:
                raise jwt.PyJWKError(f"no key for kid {kid!r}")
            return key

        verify = create_signature_verifier(provider, ALGORITHMS)
        for view in (as_sdk_reads, as_strict_reads):
            try:
                verify(view)
            except NoSignatureError:
                raise CardVerificationError(
                    "the agent card is not signed", reason="missing"
                ) from None
            except SignatureVerificationError:
                known = any(k in keys for k in kids) or None in keys
                source = "the keys given" if self._given is not None else self._jwks_url
                raise CardVerificationError(
                    "no signature on the agent card verifies: the card was changed after "
                    "it was signed, or signed with another key"
                    if known
                    else f"the agent card is signed with a key not in {source}",
                    reason="invalid" if known else "unknown_key",
                ) from None
        signed: dict[str, Any] = MessageToDict(as_sdk_reads)
        return signed

    async def _fetch_jwks(self) -> Mapping[str, Any]:
        try:
            async with self._http.stream("GET", self._jwks_url) as response:
                if response.status_code != 200:
                    raise CardVerificationError(
                        f"no key set at {self._jwks_url} (HTTP {response.status_code})",
                        reason="no_keys",
                    )
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > _MAX_JWKS_BYTES:
                        raise self._no_keys("is too large")
        except httpx.HTTPError as exc:
            raise A2AConnectionError(f"cannot fetch {self._jwks_url}: {exc}") from exc
        try:
            document = json.loads(bytes(body))
        except ValueError:
            raise self._no_keys("is not JSON") from None
        if not isinstance(document, Mapping):
            raise self._no_keys("is not a JWKS")
        return document

    def _no_keys(self, problem: str) -> CardVerificationError:
        return CardVerificationError(f"the key set at {self._jwks_url} {problem}", reason="no_keys")


def _parse_keys(given: CardKeys | Mapping[str, Any]) -> dict[str | None, Any]:
    """``{kid: PyJWK}`` (a PEM key, which has no kid, is stored under ``None``)."""
    if isinstance(given, str | bytes):
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
        from cryptography.hazmat.primitives.serialization import load_pem_public_key

        pem = given.encode() if isinstance(given, str) else given
        try:
            public = load_pem_public_key(pem)
        except ValueError as exc:
            raise ValueError(f"card_keys is not a usable PEM public key: {exc}") from None
        if not isinstance(
            public, ec.EllipticCurvePublicKey | rsa.RSAPublicKey | ed25519.Ed25519PublicKey
        ):
            raise ValueError(f"card_keys: unsupported key type {type(public).__name__}")
        return {None: pem}  # PyJWT loads it for the algorithm each signature names
    if isinstance(given, Mapping):
        given = given["keys"] if isinstance(given.get("keys"), list) else [given]
    keys: dict[str | None, Any] = {}
    for member in given:
        if not isinstance(member, Mapping) or member.get("kty") == "oct" or "d" in member:
            continue  # secrets and private keys have no place in a verification key set
        if member.get("use", "sig") != "sig":
            continue
        try:
            key = jwt.PyJWK(dict(member))
        except (jwt.PyJWTError, ValueError, TypeError):
            continue
        kid = member.get("kid")
        keys[kid if isinstance(kid, str) else None] = key
    if not keys:
        raise CardVerificationError("no usable public signature keys", reason="no_keys")
    return keys
