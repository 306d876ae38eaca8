"""Signed agent cards (A2A 1.0 ``signatures``), made with the a2a-sdk's own signer; the key
(a ``card_signing_key`` file, else kept in the SQL store, else generated in memory: the
table in docs/auth.md, "Signed agent cards"); and ``/.well-known/jwks.json``, the signer's
``jku``.

The signature covers the card's A2A 1.0 canonical form (``a2a.utils.signing``), so the
0.3 keys the SDK merges in for clients without a version are not covered, and the pure
0.3 card (``/.well-known/agent.json``) is served unsigned rather than with a signature a
0.3 verifier could not check.

Example::

    signer = CardSigner(agent_url="https://agent.example", key_file="card-key.pem")
    signed = signer.sign(card)           # a signed copy; ``card`` is not changed
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jwt
from a2a.types import AgentCard
from a2a.utils.signing import create_agent_card_signer
from cachetools import LRUCache
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from sqlalchemy import MetaData

from apcore_a2a.adapters.agent_card import CardDocument, serialize_card
from apcore_a2a.push import JWKS_PATH
from apcore_a2a.push.signing import PrivateKey, SigningKey, stored_key
from apcore_a2a.push.status import create_tables, signing_keys
from apcore_a2a.settings import SettingsError

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from sqlalchemy.ext.asyncio import AsyncEngine

    from apcore_a2a.settings import Settings

logger = logging.getLogger("apcore_a2a.keys")

Modifier = Callable[[AgentCard, "ServerCallContext"], Awaitable[AgentCard]]

_metadata = MetaData()
# The push signing key's table (what stored_key reads and writes), under a name of its own.
card_signing_keys = signing_keys.to_metadata(_metadata, name="apcore_a2a_card_signing_keys")


class CardSigner:
    """Signs agent cards with one key: *key_file*'s, else (in :meth:`start`) the key stored
    in the database, else one generated in memory (see the module docstring). Until a key
    is loaded, cards are served unsigned."""

    def __init__(
        self, *, agent_url: str, key_file: str | None = None, encryption_key: str | None = None
    ) -> None:
        self.jku = agent_url.rstrip("/") + JWKS_PATH
        self._key: SigningKey | None = None
        self._encryption_key = encryption_key
        self._sign: Callable[[AgentCard], AgentCard] | None = None
        # Signed extended cards: one per distinct skill set a caller may see.
        self._extended: LRUCache[bytes, AgentCard] = LRUCache(64)
        if key_file:
            # Read now, so a bad file stops the agent at build time with a clear error.
            self._use(load_key_file(key_file))

    def public_jwk(self) -> dict[str, Any] | None:
        """The public key as a JWK (with ``kid``, ``alg``, ``use``), once loaded."""
        return dict(self._key.public_jwk) if self._key is not None else None

    async def start(self, engine: AsyncEngine | None) -> None:
        """Load the key if it is not loaded yet."""
        if self._key is not None:
            return
        if engine is not None:
            await create_tables(engine, _metadata)
            table, what = card_signing_keys, "card signing key"
            self._use(await stored_key(engine, table, self._encryption_key, what))
            return
        logger.warning(
            "card signing: no card_signing_key file and no SQL store; using a key generated "
            "in memory, which changes on every restart"
        )
        self._use(SigningKey.generate())

    def _use(self, key: SigningKey) -> None:
        # The signer needs the private key object; SigningKey hands it out only as PEM.
        private = load_pem_private_key(key.to_pem(), password=None)
        header = {"kid": key.kid, "alg": key.algorithm, "jku": self.jku, "typ": "JOSE"}
        self._sign = create_agent_card_signer(private, header)  # type: ignore[arg-type]
        self._key = key
        self._extended.clear()
        logger.info("card signing: signing agent cards with %s key %s", key.algorithm, key.kid)

    def sign(self, card: AgentCard) -> AgentCard:
        """A copy of *card* carrying this key's signature (and no other)."""
        if self._sign is None:
            raise RuntimeError("card signing: the key is not loaded yet")
        out = AgentCard()
        out.CopyFrom(card)
        del out.signatures[:]
        return self._sign(out)

    def documents(self, current: Callable[[], CardDocument]) -> Callable[[], CardDocument]:
        """Wrap a card-document source so the bodies with the 1.0 card are signed (not the
        pure 0.3 body), kept until the source or the key changes (signing takes ms)."""
        cached: tuple[CardDocument, SigningKey, CardDocument] | None = None

        def document() -> CardDocument:
            nonlocal cached
            source = current()
            key = self._key
            if key is None:
                return source
            if cached is not None and cached[0] is source and cached[1] is key:
                return cached[2]
            signed = serialize_card(self.sign(source.card), last_modified=source.last_modified)
            result = dataclasses.replace(
                signed, legacy_body=source.legacy_body, legacy_etag=source.legacy_etag
            )
            cached = (source, key, result)
            return result

        return document

    def extended_modifier(self, modifier: Modifier | None) -> Modifier:
        """An SDK ``extended_card_modifier`` whose result is signed (cached per content)."""

        async def modify(card: AgentCard, context: ServerCallContext) -> AgentCard:
            out = await modifier(card, context) if modifier is not None else card
            if self._key is None:
                return out
            digest = hashlib.sha256(out.SerializeToString(deterministic=True)).digest()
            signed = self._extended.get(digest)
            if signed is None:
                signed = self._extended[digest] = self.sign(out)
            copy = AgentCard()
            copy.CopyFrom(signed)
            return copy

        return modify


def card_signer_from_settings(settings: Settings) -> CardSigner | None:
    """The signer the settings ask for (``card_signing`` or ``card_signing_key``), or ``None``;
    :class:`~apcore_a2a.settings.SettingsError` for an unreadable or unusable key file."""
    if not (settings.card_signing or settings.card_signing_key):
        return None
    try:
        return CardSigner(
            agent_url=settings.public_url(),
            key_file=settings.card_signing_key,
            encryption_key=settings.push_encryption_key,
        )
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def parse_key(data: bytes) -> SigningKey:
    """A signing key from PEM or JWK bytes; ``ValueError`` with a short reason otherwise."""
    text = data.strip()
    key: Any
    if text.startswith(b"{"):
        try:
            jwk = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError("the card-signing key file is neither PEM nor JSON") from None
        if not isinstance(jwk, dict) or "d" not in jwk:
            raise ValueError("a JWK card-signing key must be a private key (with 'd')")
        try:
            key = jwt.PyJWK(jwk).key
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            raise ValueError(f"the JWK is not a usable private key: {exc}") from None
    elif b"-----BEGIN" in text:
        try:
            key = load_pem_private_key(text, password=None)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"not a usable unencrypted PEM private key: {exc}") from None
    else:
        raise ValueError("the card-signing key file is neither PEM nor a JWK")
    if not isinstance(key, PrivateKey):
        raise ValueError(f"unsupported key type {type(key).__name__}")
    return SigningKey(key)


def load_key_file(path: str | os.PathLike[str]) -> SigningKey:
    """The key in *path*; a new ES256 key is generated and written there if it is missing."""
    file = Path(path)
    try:
        return parse_key(file.read_bytes())
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise ValueError(f"cannot read the card-signing key {file}: {exc.strerror}") from None
    except ValueError as exc:
        raise ValueError(f"card-signing key {file}: {exc}") from None
    fresh = SigningKey.generate()
    try:
        # O_EXCL: two processes starting together must not overwrite each other's key.
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return parse_key(file.read_bytes())
    except OSError as exc:
        raise ValueError(f"cannot create the card-signing key {file}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as out:
        out.write(fresh.to_pem())
    logger.info("card signing: generated a new %s key at %s", fresh.algorithm, file)
    return fresh
