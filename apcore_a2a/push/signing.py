"""The agent's push-signing key: JWTs for deliveries and the JWKS that verifies them.

Each delivery's JWT (``X-A2A-Signature``) binds it to its receiver and its exact body
(``aud`` = webhook URL, ``body_sha256``), so a receiver that checks it knows the POST came
from this agent unaltered. Private keys at rest (push and card signing alike) are sealed
by :func:`seal` and kept by :func:`stored_key`.

Example: ``SigningKey.generate().sign_delivery(issuer="https://agent.example",
audience="https://hook.example/a2a", task_id="t-1", body=b"{}", jti="d-1")``
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import time
from typing import TYPE_CHECKING, Any

import jwt
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import get_default_algorithms
from sqlalchemy import Table, insert, select
from sqlalchemy.exc import IntegrityError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

logger = logging.getLogger("apcore_a2a.keys")

#: Lifetime of a delivery JWT in seconds; every attempt is signed afresh.
DELIVERY_TOKEN_TTL = 300

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey

_EC_ALGS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
# RFC 7638: the members that make up the thumbprint, per key type.
_THUMBPRINT_MEMBERS = {
    "EC": ("crv", "kty", "x", "y"),
    "RSA": ("e", "kty", "n"),
    "OKP": ("crv", "kty", "x"),
}


def _algorithm_for(key: PrivateKey) -> str:
    if isinstance(key, ec.EllipticCurvePrivateKey):
        if key.curve.name not in _EC_ALGS:
            raise ValueError(f"unsupported EC curve {key.curve.name!r}")
        return _EC_ALGS[key.curve.name]
    if isinstance(key, rsa.RSAPrivateKey):
        if key.key_size < 2048:
            raise ValueError("RSA signing keys must have at least 2048 bits")
        return "RS256"
    return "EdDSA"


def _thumbprint(jwk: dict[str, Any]) -> str:
    members = {name: jwk[name] for name in _THUMBPRINT_MEMBERS[str(jwk["kty"])]}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode()


class SigningKey:
    """A private key plus what is derived from it: algorithm, ``kid`` and public JWK."""

    def __init__(self, private_key: PrivateKey) -> None:
        self._key = private_key
        self.algorithm = _algorithm_for(private_key)
        public = private_key.public_key()
        jwk = dict(get_default_algorithms()[self.algorithm].to_jwk(public, as_dict=True))
        self.kid = _thumbprint(jwk)
        jwk.update({"kid": self.kid, "alg": self.algorithm, "use": "sig"})
        self.public_jwk: dict[str, Any] = jwk

    @classmethod
    def generate(cls) -> SigningKey:
        """A fresh ES256 (P-256) key."""
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @classmethod
    def from_pem(cls, pem: str | bytes) -> SigningKey:
        """Load an unencrypted PKCS#8 / traditional PEM private key (EC, RSA or Ed25519)."""
        data = pem.encode() if isinstance(pem, str) else pem
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"push signing key is not a usable PEM private key: {exc}") from None
        if not isinstance(key, PrivateKey):
            raise ValueError(f"unsupported push signing key type {type(key).__name__}")
        return cls(key)

    def to_pem(self) -> bytes:
        """The private key as unencrypted PKCS#8 PEM (for storage)."""
        return self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def jwks(self) -> dict[str, Any]:
        """The JSON Web Key Set that verifies this key's signatures."""
        return {"keys": [dict(self.public_jwk)]}

    def sign_delivery(
        self,
        *,
        issuer: str,
        audience: str,
        task_id: str,
        body: bytes,
        jti: str,
        now: float | None = None,
    ) -> str:
        """Sign the JWT for one delivery attempt of *body* to *audience*."""
        issued = int(time.time() if now is None else now)
        claims = {
            "iss": issuer,
            "aud": audience,
            "iat": issued,
            "exp": issued + DELIVERY_TOKEN_TTL,
            "jti": jti,
            "task_id": task_id,
            "body_sha256": hashlib.sha256(body).hexdigest(),
        }
        return jwt.encode(
            claims, self._key, algorithm=self.algorithm, headers={"kid": self.kid, "typ": "JWT"}
        )


# Private keys at rest (push and card alike, so either reads back the same way), sealed
# with ``push_encryption_key`` when it is set.
_FERNET_PREFIX = "fernet:"


def seal(pem: str, encryption_key: str | None) -> str:
    """*pem* as stored: sealed when *encryption_key* is set, else as is."""
    if not encryption_key:
        return pem
    return _FERNET_PREFIX + Fernet(encryption_key.encode()).encrypt(pem.encode()).decode()


def unseal(data: str, encryption_key: str | None, what: str) -> str:
    """The PEM of a stored key; *what* names it in errors (``"push signing key"``)."""
    if not data.startswith(_FERNET_PREFIX):
        if encryption_key:
            fix = "it was stored before push_encryption_key was set; rotate it"
        else:
            fix = "set A2A_PUSH_ENCRYPTION_KEY (or A2A_PUSH_ENCRYPTION_KEY_FILE) to seal it"
        logger.warning(
            "the %s is stored in the clear in the task database (readable by anyone who "
            "can read the database): %s",
            what,
            fix,
        )
        return data
    if not encryption_key:
        raise RuntimeError(f"the stored {what} is encrypted; set push_encryption_key to read it")
    try:
        return Fernet(encryption_key.encode()).decrypt(data[len(_FERNET_PREFIX) :]).decode()
    except InvalidToken:
        raise RuntimeError(f"push_encryption_key does not decrypt the stored {what}") from None


async def stored_key(
    engine: AsyncEngine, table: Table, encryption_key: str | None, what: str
) -> SigningKey:
    """The key kept in *table* (kid, key_data, created_at), generated and stored on first
    use; racing replicas each insert one, then all use the oldest."""
    oldest = select(table.c.key_data).order_by(table.c.created_at, table.c.kid).limit(1)
    async with engine.connect() as conn:
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
        logger.info("generated a new %s and stored it in the database", what)
    return SigningKey.from_pem(unseal(str(data), encryption_key, what))
