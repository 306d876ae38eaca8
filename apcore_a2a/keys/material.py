"""Where the agent-card signing key comes from, and where a generated one is kept.

* ``card_signing_key`` names a file: an unencrypted PEM private key or a private JWK
  (EC P-256/384/521, RSA >= 2048 bits or Ed25519). If the file does not exist yet, a
  fresh ES256 key is generated and written there (mode 0600), so a single process with
  the memory store keeps its key across restarts.
* Without a file and with a SQL task store, the key is generated once and kept in the
  database beside the push-signing key (table ``apcore_a2a_card_signing_keys``, sealed
  with ``push_encryption_key`` when that is set), shared by every replica.
* Without either, the key is generated in memory and changes on every restart (logged);
  clients that verify against the agent's JWKS keep working, pinned keys do not.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from sqlalchemy import Column, Float, MetaData, String, Table, Text, insert, select
from sqlalchemy.exc import IntegrityError

from apcore_a2a.push.signing import SigningKey, seal, unseal

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["load_key_file", "parse_key", "stored_key"]

logger = logging.getLogger("apcore_a2a.keys")

_metadata = MetaData()
card_signing_keys = Table(
    "apcore_a2a_card_signing_keys",
    _metadata,
    Column("kid", String(64), primary_key=True),
    Column("key_data", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)


def _signing_key(key: Any) -> SigningKey:
    if not isinstance(
        key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey
    ):
        raise ValueError(f"unsupported key type {type(key).__name__}")
    return SigningKey(key)


def _from_jwk(data: Any) -> SigningKey:
    if not isinstance(data, dict) or "d" not in data:
        raise ValueError("a JWK card-signing key must be a private key (with 'd')")
    try:
        key = jwt.PyJWK(data).key
    except (jwt.PyJWTError, ValueError, TypeError) as exc:
        raise ValueError(f"the JWK is not a usable private key: {exc}") from None
    return _signing_key(key)


def parse_key(data: bytes) -> SigningKey:
    """A signing key from PEM or JWK bytes; ``ValueError`` with a short reason otherwise."""
    text = data.strip()
    if text.startswith(b"{"):
        try:
            return _from_jwk(json.loads(text))
        except json.JSONDecodeError:
            raise ValueError("the card-signing key file is neither PEM nor JSON") from None
    if b"-----BEGIN" not in text:
        raise ValueError("the card-signing key file is neither PEM nor a JWK")
    try:
        key = load_pem_private_key(text, password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a usable unencrypted PEM private key: {exc}") from None
    return _signing_key(key)


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


async def stored_key(engine: AsyncEngine, encryption_key: str | None) -> SigningKey:
    """The key kept in the database, generated and stored on first use.

    Racing replicas each insert a key; all of them then use the oldest one.
    """
    async with engine.begin() as conn:
        await conn.run_sync(_metadata.create_all)
    data = await _first(engine)
    if data is None:
        fresh = SigningKey.generate()
        with contextlib.suppress(IntegrityError):
            async with engine.begin() as conn:
                await conn.execute(
                    insert(card_signing_keys).values(
                        kid=fresh.kid,
                        key_data=seal(fresh.to_pem().decode(), encryption_key),
                        created_at=time.time(),
                    )
                )
        data = await _first(engine)
        if data is None:  # pragma: no cover - the insert above cannot vanish
            raise RuntimeError("card signing: could not store the generated key")
        logger.info("card signing: generated a new key and stored it in the database")
    return SigningKey.from_pem(unseal(data, encryption_key, "card signing key"))


async def _first(engine: AsyncEngine) -> str | None:
    query = (
        select(card_signing_keys.c.key_data)
        .order_by(card_signing_keys.c.created_at, card_signing_keys.c.kid)
        .limit(1)
    )
    async with engine.connect() as conn:
        row = (await conn.execute(query)).first()
    return None if row is None else str(row[0])
