"""Bearer JWT authentication with PyJWT: a static key or a JWKS endpoint with key rotation."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jwt
from a2a.types import HTTPAuthSecurityScheme, SecurityScheme
from apcore import Identity
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key
from cryptography.x509 import load_pem_x509_certificate

from apcore_a2a.auth._token_cache import VerifiedTokenCache
from apcore_a2a.auth.authenticator import InvalidCredentials, header_value, stamp_identity
from apcore_a2a.auth.claims import ClaimMapping
from apcore_a2a.auth.jwks import JWKSKeySource, KeyLookupError

__all__ = ["JWTAuthenticator"]

logger = logging.getLogger("apcore_a2a.auth")

_HMAC = ("HS256", "HS384", "HS512")
_RSA = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_EC = ("ES256", "ES384", "ES512")
_OKP = ("EdDSA",)
_CURVE_ALG = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
_MIN_HMAC_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}
_JWKS_DEFAULT_ALGORITHMS = ("RS256", "ES256")
#: ``auth_scheme`` of JWT identities (tasks owned by ``jwt:<issuer tag>:<sub>``).
JWT_SCHEME = "jwt"

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

    With *jwks_url* keys are looked up by the token's ``kid`` in a
    :class:`~apcore_a2a.auth.jwks.JWKSKeySource`: fetched with async HTTP on the event
    loop (never on the thread pool that runs sync modules), one fetch at a time for
    everyone, each within *jwks_timeout* seconds. The key set is refreshed after
    *jwks_cache_seconds* (in the background: requests with a known ``kid`` never wait),
    an unknown ``kid`` triggers a refetch at most once per *jwks_refresh_cooldown* seconds
    (how a newly published key is picked up without a restart) and is then refused
    without a fetch for *jwks_unknown_kid_seconds*; failed fetches back off up to
    *jwks_backoff_max* seconds while the last good key set stays in use.

    Tokens must carry ``exp`` unless *require_exp* is false (a token without one would
    be valid forever); *require_claims* lists further required claims (``sub`` by default).
    *max_lifetime* (seconds, 0 = none) refuses tokens that expire further ahead than that
    (or never), so a leaked token minted with a far-future ``exp`` does not work for years.

    Identities are stamped with how the caller authenticated (``auth_scheme="jwt"`` and
    the token's ``iss`` in ``auth_issuer``), so the task owner of JWT ``sub=alice`` is not
    the owner of an API key named ``alice`` (see :func:`~apcore_a2a.auth.owner_key`).

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
        require_exp: bool = True,
        max_lifetime: float = 0,
        max_token_bytes: int = 8192,
        jwks_cache_seconds: float = 300,
        jwks_refresh_cooldown: float = 30,
        jwks_timeout: float = 10,
        jwks_unknown_kid_seconds: float = 60,
        jwks_backoff_max: float = 60,
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
        if require_exp and "exp" not in self.require_claims:
            self.require_claims.append("exp")
        self.max_lifetime = max_lifetime
        self.max_token_bytes = max_token_bytes
        self._verified = VerifiedTokenCache(verified_cache_size, verified_cache_seconds)
        self._key: str | bytes | PublicKey | None = None
        self._jwks: JWKSKeySource | None = None

        requested = tuple(algorithms or ())
        if "none" in (a.lower() for a in requested):
            raise ValueError("the 'none' JWT algorithm is never accepted")
        if jwks_url is not None:
            allowed: tuple[str, ...] = _RSA + _EC + _OKP
            defaults: tuple[str, ...] = _JWKS_DEFAULT_ALGORITHMS
            self._jwks = JWKSKeySource(
                jwks_url,
                cache_seconds=jwks_cache_seconds,
                refresh_cooldown=jwks_refresh_cooldown,
                timeout=jwks_timeout,
                unknown_kid_seconds=jwks_unknown_kid_seconds,
                backoff_max=jwks_backoff_max,
            )
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
        issuer = claims.get("iss")
        identity = stamp_identity(identity, JWT_SCHEME, issuer if isinstance(issuer, str) else None)
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
        if self.max_lifetime:
            exp = claims.get("exp")
            ahead = exp - time.time() if isinstance(exp, int | float) else float("inf")
            if ahead > self.max_lifetime + self.leeway:
                raise InvalidCredentials(
                    f"token expires more than {self.max_lifetime:g} s ahead (the maximum)"
                )
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
        try:
            return await self._jwks.get(kid)
        except KeyLookupError as exc:
            raise InvalidCredentials(str(exc)) from None

    @property
    def jwks(self) -> JWKSKeySource | None:
        """The JWKS key source (``None`` with a static key)."""
        return self._jwks

    async def aclose(self) -> None:
        """Cancel a JWKS fetch in flight (called when the server stops)."""
        if self._jwks is not None:
            await self._jwks.aclose()
