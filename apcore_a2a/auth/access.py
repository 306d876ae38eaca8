"""Who may use the agent at all: the decision the HTTP middleware and the gRPC interceptor
share; each binding renders the refusal its own way. Per-skill rules stay with apcore's ACL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from apcore_a2a.adapters.errors import clean_for_log
from apcore_a2a.auth.authenticator import Authenticator, InvalidCredentials
from apcore_a2a.errors import PermissionDeniedError, UnauthenticatedError

if TYPE_CHECKING:
    from apcore import Identity

__all__ = ["SCOPES_ATTR", "Gate", "words"]

logger = logging.getLogger("apcore_a2a.auth")

#: ``Identity.attrs`` key of the OAuth scopes a token granted (set by the JWT authenticator).
SCOPES_ATTR = "scopes"


def words(value: Any) -> tuple[str, ...]:
    """A list of strings, or a space-separated string (OAuth ``scope``), as a tuple."""
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list | tuple):
        return tuple(v for v in value if isinstance(v, str) and v)
    return ()


class Gate:
    """Authenticate a caller and decide whether it may use the agent (else raise
    :class:`~apcore_a2a.errors.UnauthenticatedError` or ``PermissionDeniedError``).

    A caller needs *one* of *roles* and *all* of *scopes* (RFC 6749 §3.3), when given.
    Refusals never say why a credential failed (that goes to the INFO log, without the
    credential); a permission refusal names what the agent requires, never what the
    caller holds (spec §3.3.2).

    Example::

        gate = Gate(JWTAuthenticator(secret), roles=("analyst", "admin"), scopes=("a2a:call",))
        identity = await gate.identify(headers)
        gate.admit(identity, anonymous_ok=False)  # or raises
    """

    def __init__(
        self, authenticator: Authenticator, *, roles: Iterable[str] = (), scopes: Iterable[str] = ()
    ) -> None:
        self.authenticator = authenticator
        self.roles, self.scopes = tuple(roles), tuple(scopes)
        # One challenge per scheme on the card (RFC 9110 §11.6.1), so a client can tell
        # what to send without the card.
        found: list[str] = []
        for scheme in authenticator.security_schemes().values():
            if scheme.HasField("api_key_security_scheme"):
                found.append(f'ApiKey header="{scheme.api_key_security_scheme.name}"')
            elif scheme.HasField("http_auth_security_scheme"):
                found.append(scheme.http_auth_security_scheme.scheme.capitalize() or "Bearer")
        #: ``WWW-Authenticate`` values for a 401 (gRPC: trailers)
        self.challenges = list(dict.fromkeys(found)) or ["Bearer"]
        self._message = UnauthenticatedError.message
        if self.challenges == ["Bearer"]:
            self._message = "Missing or invalid Bearer token"
        elif len(self.challenges) == 1 and self.challenges[0].startswith("ApiKey"):
            self._message = "Missing or invalid API key"

    def unauthenticated(self) -> UnauthenticatedError:
        return UnauthenticatedError(self._message)

    async def identify(self, headers: Mapping[str, str]) -> Identity | None:
        """The caller's identity, ``None`` without credentials; bad ones raise
        :class:`~apcore_a2a.errors.UnauthenticatedError`."""
        try:
            return await self.authenticator.authenticate(headers)
        except InvalidCredentials as exc:
            # The reason, never the credential: these exceptions name what failed.
            logger.info("refused credentials: %s", clean_for_log(str(exc), 300))
            raise self.unauthenticated() from None

    def admit(self, identity: Identity | None, *, anonymous_ok: bool) -> None:
        """Raise unless *identity* may use the agent. Anonymous callers pass only when
        *anonymous_ok* and no role or scope is required."""
        if identity is None:
            if anonymous_ok and not (self.roles or self.scopes):
                return
            raise self.unauthenticated()
        granted = words(identity.attrs.get(SCOPES_ATTR))
        missing = " ".join(s for s in self.scopes if s not in granted)
        wanted = f"scope {missing!r}" if missing else ""
        if self.roles and not set(self.roles) & set(identity.roles):
            wanted = "role " + " or ".join(repr(r) for r in self.roles)
        if wanted:
            raise PermissionDeniedError(f"Permission denied: this agent requires the {wanted}")
