"""Key material generated per test session, token minting and a mutable JWKS server app."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

HMAC_SECRET = secrets.token_urlsafe(48)
ISSUER = "https://idp.test/"
AUDIENCE = "apcore-a2a-test"


@dataclass
class KeyPair:
    """A private key, its public PEM, and the JWT algorithm it signs with."""

    alg: str
    private: Any
    kid: str
    #: whether the JWK names its algorithm (``alg`` is optional, RFC 7517 §4.4)
    declares_alg: bool = True

    @property
    def public_pem(self) -> str:
        return (
            self.private.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )

    def jwk(self) -> dict[str, Any]:
        algo = jwt.get_algorithm_by_name(self.alg)
        data: dict[str, Any] = json.loads(algo.to_jwk(self.private.public_key()))
        data.update(kid=self.kid, use="sig")
        if self.declares_alg:
            data["alg"] = self.alg
        return data

    def sign(self, claims: dict[str, Any], *, alg: str | None = None, **headers: Any) -> str:
        return jwt.encode(
            claims, self.private, algorithm=alg or self.alg, headers={"kid": self.kid, **headers}
        )


def rsa_pair(kid: str = "rsa-1") -> KeyPair:
    return KeyPair("RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048), kid)


def ec_pair(kid: str = "ec-1") -> KeyPair:
    return KeyPair("ES256", ec.generate_private_key(ec.SECP256R1()), kid)


def claims(sub: str | None = "alice", **extra: Any) -> dict[str, Any]:
    """Standard valid claims for the test issuer/audience, expiring in 5 minutes."""
    now = int(time.time())
    out: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300}
    if sub is not None:
        out["sub"] = sub
    out.update(extra)
    return out


def hs_token(
    sub: str | None = "alice", *, alg: str = "HS256", secret: str = HMAC_SECRET, **extra: Any
) -> str:
    return jwt.encode(claims(sub, **extra), secret, algorithm=alg)


def hs_plain(**payload: Any) -> str:
    """An HS256 token over exactly *payload* plus an ``exp`` 10 minutes ahead (no iss/aud)."""
    payload.setdefault("exp", int(time.time()) + 600)
    return jwt.encode(payload, HMAC_SECRET, algorithm="HS256")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class JWKSServer:
    """A Starlette app publishing a key set that tests can change (rotation)."""

    keys: list[KeyPair] = field(default_factory=list)
    fetches: int = 0
    broken: bool = False

    def app(self) -> Starlette:
        async def jwks(request: Request) -> Response:
            self.fetches += 1
            if self.broken:
                return Response("<html>oops</html>", status_code=200, media_type="text/html")
            return JSONResponse({"keys": [k.jwk() for k in self.keys]})

        return Starlette(routes=[Route("/.well-known/jwks.json", jwks)])
