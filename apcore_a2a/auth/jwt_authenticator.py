"""Bearer JWT authentication with PyJWT: a static key or a JWKS endpoint with key rotation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import jwt
from a2a.types import HTTPAuthSecurityScheme, SecurityScheme
from apcore import Identity
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key
from cryptography.x509 import load_pem_x509_certificate

from apcore_a2a.auth._token_cache import VerifiedTokenCache
from apcore_a2a.auth.authenticator import InvalidCredentials, header_value
from apcore_a2a.auth.claims import ClaimMapping

__all__ = ["JWTAuthenticator"]

logger = logging.getLogger("apcore_a2a.auth")

_HMAC = ("HS256", "HS384", "HS512")
_RSA = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_EC = ("ES256", "ES384", "ES512")
_OKP = ("EdDSA",)
_CURVE_ALG = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
_MIN_HMAC_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}
_JWKS_DEFAULT_ALGORITHMS = ("RS256", "ES256")

PublicKey = (
    rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | ed448.Ed448PublicKey
)


def _load_pem(pem: str | bytes) -> PublicKey:
    """A public key from a PEM public key, certificate or (for convenience) private key."""
    data = pem.encode() if isinstance(pem, str) else pem
    if b"CERTIFICATE" in data:
        key: Any = load_pem_x509_certificate(data).public_key()
    elif b"PRIVATE KEY" in data:
        # Only the public half is ever needed to verify; keep nothing else in memory.
        key = load_pem_private_key(data, password=None).public_key()
    else:
        key = load_pem_public_key(data)
    if not isinstance(
        key,
        rsa.RSAPublicKey
        | ec.EllipticCurvePublicKey
        | ed25519.Ed25519PublicKey
        | ed448.Ed448PublicKey,
    ):
        raise ValueError(f"unsupported JWT verification key type {type(key).__name__}")
    return key


def _family(key: PublicKey) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(allowed algorithms, default algorithms) for an asymmetric key."""
    if isinstance(key, rsa.RSAPublicKey):
        return _RSA, ("RS256",)
    if isinstance(key, ec.EllipticCurvePublicKey):
        alg = _CURVE_ALG.get(key.curve.name)
        if alg is None:
            raise ValueError(f"unsupported EC curve {key.curve.name}")
        return (alg,), (alg,)
    return _OKP, _OKP


def _looks_like_pem(key: str | bytes) -> bool:
    if isinstance(key, bytes):
        return b"-----BEGIN" in key
    return "-----BEGIN" in key


class JWTAuthenticator:
    """Verify ``Authorization: Bearer <jwt>`` and map its claims to an apcore ``Identity``.

    Give either *key* (an HMAC secret, or a PEM public key / certificate) or *jwks_url*.
    The algorithm allow-list is derived from the key when not given, and it can never mix
    HMAC with asymmetric algorithms, so a token "signed" with the public key as an HMAC
    secret is rejected. ``alg: none`` is never accepted.

    With *jwks_url* keys are looked up by the token's ``kid`` through PyJWT's
    ``PyJWKClient``: the key set is cached for *jwks_cache_seconds*, and an unknown
    ``kid`` triggers a refetch (at most once per *jwks_refresh_cooldown* seconds), which
    is how a newly published key is picked up without a restart.

    Verified tokens are remembered (up to *verified_cache_size*, for at most
    *verified_cache_seconds* and never past their ``exp``), so a client repeating its
    token is not re-verified on every request; ``verified_cache_size=0`` turns this off.

    Example::

        auth = JWTAuthenticator(jwks_url="https://idp.example.com/.well-known/jwks.json",
                                audience="my-agent", issuer="https://idp.example.com/")
    """

    def __init__(
        self,
        key: str | bytes | None = None,
        *,
        jwks_url: str | None = None,
        algorithms: Sequence[str] | None = None,
        audience: str | Sequence[str] | None = None,
        issuer: str | Sequence[str] | None = None,
        leeway: float = 0,
        claim_mapping: ClaimMapping | None = None,
        require_claims: Sequence[str] = ("sub",),
        max_token_bytes: int = 8192,
        jwks_cache_seconds: float = 300,
        jwks_refresh_cooldown: float = 30,
        jwks_timeout: float = 10,
        verified_cache_size: int = 1024,
        verified_cache_seconds: float = 60,
    ) -> None:
        if (key is None) == (jwks_url is None):
            raise ValueError("JWTAuthenticator needs exactly one of key= or jwks_url=")
        self.audience = audience
        self.issuer = list(issuer) if isinstance(issuer, list | tuple) else issuer
        self.leeway = leeway
        self.claim_mapping = claim_mapping or ClaimMapping()
        self.require_claims = list(require_claims)
        self.max_token_bytes = max_token_bytes
        self._verified = VerifiedTokenCache(verified_cache_size, verified_cache_seconds)
        self._key: str | bytes | PublicKey | None = None
        self._jwks: jwt.PyJWKClient | None = None

        requested = tuple(algorithms or ())
        if "none" in (a.lower() for a in requested):
            raise ValueError("the 'none' JWT algorithm is never accepted")
        if jwks_url is not None:
            allowed: tuple[str, ...] = _RSA + _EC + _OKP
            defaults: tuple[str, ...] = _JWKS_DEFAULT_ALGORITHMS
            try:
                self._jwks = jwt.PyJWKClient(
                    jwks_url,
                    cache_jwk_set=True,
                    lifespan=jwks_cache_seconds,
                    cooldown_duration=jwks_refresh_cooldown,
                    timeout=jwks_timeout,
                )
            except jwt.PyJWKClientError as exc:
                raise ValueError(str(exc)) from None
        elif key is not None and _looks_like_pem(key):
            public = _load_pem(key)
            allowed, defaults = _family(public)
            self._key = public
        elif key:
            allowed, defaults = _HMAC, ("HS256",)
            self._key = key
        else:
            raise ValueError("the JWT key must not be empty")
        self.algorithms: list[str] = list(requested or defaults)
        wrong = [a for a in self.algorithms if a not in allowed]
        if wrong:
            kind = "a JWKS URL" if jwks_url else "this key"
            raise ValueError(
                f"JWT algorithm(s) {', '.join(wrong)} cannot be used with {kind}; "
                f"allowed: {', '.join(allowed)}"
            )
        if isinstance(self._key, str | bytes):
            size = len(self._key.encode() if isinstance(self._key, str) else self._key)
            needed = max(_MIN_HMAC_BYTES[a] for a in self.algorithms)
            if size < needed:
                logger.warning(
                    "JWT HMAC secret is %d bytes; at least %d are recommended (RFC 7518 3.2)",
                    size,
                    needed,
                )

    # -- Authenticator protocol ------------------------------------------------------
    def security_schemes(self) -> dict[str, SecurityScheme]:
        """``{"bearer": HTTP Bearer (JWT)}``."""
        return {
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    bearer_format="JWT",
                    description="JWT in the Authorization header",
                )
            )
        }

    async def authenticate(self, headers: Mapping[str, str]) -> Identity | None:
        """Verify the bearer token; see :class:`~apcore_a2a.auth.Authenticator`."""
        value = header_value(headers, "authorization")
        if value is None:
            return None
        scheme, _, token = value.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise InvalidCredentials("Authorization header is not a Bearer token")
        if len(token) > self.max_token_bytes:
            raise InvalidCredentials(f"token longer than {self.max_token_bytes} bytes")
        cached = self._verified.get(token)
        if cached is not None:
            return cached
        key = await self._verification_key(token)
        claims = self.decode(token, key)
        identity = self.claim_mapping.to_identity(claims)
        if identity is None:
            raise InvalidCredentials(f"claim {self.claim_mapping.id!r} missing or not a string")
        self._verified.put(token, identity, claims, self.leeway)
        return identity

    # -- helpers ---------------------------------------------------------------------
    def decode(self, token: str, key: Any) -> dict[str, Any]:
        """Verify signature and registered claims; raise :class:`InvalidCredentials`."""
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=self.algorithms,
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": self.require_claims},
            )
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            # PyJWTError covers bad tokens and unusable keys; the others guard against
            # malformed input slipping through a crypto backend unwrapped.
            raise InvalidCredentials(f"{type(exc).__name__}: {exc}") from None
        return claims

    async def _verification_key(self, token: str) -> Any:
        if self._jwks is None:
            return self._key
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidCredentials(f"{type(exc).__name__}: {exc}") from None
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise InvalidCredentials("token has no 'kid' header; required with a JWKS URL")
        cached = self._cached_key(kid)
        if cached is not None:
            return cached
        # A cache miss may mean a network fetch; PyJWKClient is blocking, so keep it off
        # the event loop. Its lock serialises concurrent misses into one fetch.
        try:
            return await asyncio.to_thread(self._jwks.get_signing_key, kid)
        except jwt.PyJWKClientConnectionError as exc:
            logger.warning("JWKS fetch from %s failed: %s", self._jwks.uri, exc)
            raise InvalidCredentials("JWKS unavailable") from None
        except (jwt.PyJWKClientError, jwt.PyJWKError, jwt.PyJWKSetError) as exc:
            raise InvalidCredentials(f"{type(exc).__name__}: {exc}") from None
        except Exception as exc:  # e.g. a JWKS endpoint answering with non-JSON
            logger.warning("JWKS from %s unusable: %s", self._jwks.uri, type(exc).__name__)
            raise InvalidCredentials("JWKS unusable") from None

    def _cached_key(self, kid: str) -> jwt.PyJWK | None:
        """The signing key for *kid* from a still-fresh cached key set, without I/O."""
        assert self._jwks is not None
        cache = self._jwks.jwk_set_cache
        jwk_set = cache.get() if cache is not None else None
        if not isinstance(jwk_set, jwt.PyJWKSet):
            return None
        for candidate in jwk_set.keys:
            if candidate.key_id == kid and candidate.public_key_use in ("sig", None):
                return candidate
        return None
