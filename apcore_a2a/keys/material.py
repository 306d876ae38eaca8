"""Where the agent-card signing key comes from, and where a generated one is kept.

* ``card_signing_key`` names a file (unencrypted PEM or private JWK); a missing one is
  created with a fresh ES256 key (mode 0600), so a single process keeps its key.
* Without a file and with a SQL task store, the key is generated once and kept in the
  database (sealed with ``push_encryption_key`` when set), shared by every replica.
* Without either, the key is generated in memory and changes on every restart (logged).
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
    if not isinstance(
        key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey
    ):
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


async def stored_key(engine: AsyncEngine, encryption_key: str | None) -> SigningKey:
    """The key kept in the database, generated and stored on first use.

    Racing replicas each insert a key; all of them then use the oldest one.
    """
    table = card_signing_keys
    oldest = select(table.c.key_data).order_by(table.c.created_at, table.c.kid).limit(1)
    async with engine.begin() as conn:
        await conn.run_sync(_metadata.create_all)
        data = (await conn.execute(oldest)).scalar()
    if data is None:
        fresh = SigningKey.generate()
        sealed = seal(fresh.to_pem().decode(), encryption_key)
        with contextlib.suppress(IntegrityError):
            async with engine.begin() as conn:
                await conn.execute(
                    insert(table).values(kid=fresh.kid, key_data=sealed, created_at=time.time())
                )
        async with engine.connect() as conn:
            data = (await conn.execute(oldest)).scalar_one()
        logger.info("card signing: generated a new key and stored it in the database")
    return SigningKey.from_pem(unseal(str(data), encryption_key, "card signing key"))
