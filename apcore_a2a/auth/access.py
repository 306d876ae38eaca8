"""Who may use the agent at all: the caller's credentials, and the roles and OAuth scopes
required of every caller.

:class:`Gate` is the one decision the HTTP middleware and the gRPC interceptor share: it
turns headers into an identity and refuses with :class:`~apcore_a2a.errors.UnauthenticatedError`
(401 / ``UNAUTHENTICATED``) or :class:`~apcore_a2a.errors.PermissionDeniedError` (403 /
``PERMISSION_DENIED``); each binding renders the refusal its own way. Per-skill rules stay
with apcore's ACL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from apcore_a2a.auth.authenticator import Authenticator, InvalidCredentials
from apcore_a2a.errors import PermissionDeniedError, UnauthenticatedError

if TYPE_CHECKING:
    from apcore import Identity

    from apcore_a2a.settings import Settings

__all__ = ["SCOPES_ATTR", "AgentAccess", "Gate", "challenges", "scopes_of"]

logger = logging.getLogger("apcore_a2a.auth")

#: ``Identity.attrs`` key of the OAuth scopes a token granted (set by the JWT authenticator).
SCOPES_ATTR = "scopes"


def scopes_of(identity: Identity) -> frozenset[str]:
    """The scopes recorded on *identity* (a list, or a space-separated string)."""
    raw = identity.attrs.get(SCOPES_ATTR)
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, Iterable):
        return frozenset(s for s in raw if isinstance(s, str))
    return frozenset()


@dataclass(frozen=True, slots=True)
class AgentAccess:
    """A caller needs *one* of ``roles`` (when given) and *all* of ``scopes`` (when given).

    Roles name groups of people or services, one is enough; scopes are what a token was
    issued for, and each one asked for must have been granted (RFC 6749 §3.3).

    Example::

        access = AgentAccess(roles=("analyst", "admin"), scopes=("a2a:write",))
        access.denial(Identity(id="bob", roles=("analyst",)))  # "... requires the scope ..."
    """

    roles: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> AgentAccess:
        return cls(tuple(settings.required_roles), tuple(settings.required_scopes))

    def __bool__(self) -> bool:
        return bool(self.roles or self.scopes)

    def missing_scopes(self, identity: Identity) -> list[str]:
        granted = scopes_of(identity)
        return [s for s in self.scopes if s not in granted]

    def denial(self, identity: Identity) -> str | None:
        """Why *identity* may not use the agent, or ``None`` when it may.

        The text names what the agent requires (spec §3.3.2 asks for it), never what the
        caller holds.
        """
        if self.roles and not set(self.roles) & set(identity.roles):
            wanted = " or ".join(repr(r) for r in self.roles)
            return f"Permission denied: this agent requires the role {wanted}"
        missing = self.missing_scopes(identity)
        if missing:
            return f"Permission denied: this agent requires the scope {' '.join(missing)!r}"
        return None


def challenges(authenticator: Authenticator) -> tuple[list[str], str]:
    """(``WWW-Authenticate`` challenges, message) for an unauthenticated request.

    One challenge per scheme on the card (RFC 9110 §11.6.1): ``Bearer`` (RFC 6750) for
    HTTP bearer auth, ``ApiKey header="<name>"`` for an API key, so a client can tell what
    to send without the card.
    """
    found: list[str] = []
    for scheme in authenticator.security_schemes().values():
        if scheme.HasField("api_key_security_scheme"):
            found.append(f'ApiKey header="{scheme.api_key_security_scheme.name}"')
        elif scheme.HasField("http_auth_security_scheme"):
            found.append(scheme.http_auth_security_scheme.scheme.capitalize() or "Bearer")
    values = list(dict.fromkeys(found)) or ["Bearer"]
    if values == ["Bearer"]:
        return values, "Missing or invalid Bearer token"
    if len(values) == 1 and values[0].startswith("ApiKey"):
        return values, "Missing or invalid API key"
    return values, UnauthenticatedError.message


class Gate:
    """Authenticate a caller and decide whether it may use the agent.

    Refusals never say why a credential failed (that goes to the DEBUG log, without the
    credential); a permission refusal names what the agent requires.
    """

    def __init__(self, authenticator: Authenticator, access: AgentAccess | None = None) -> None:
        self.authenticator = authenticator
        self.access = access or AgentAccess()
        #: ``WWW-Authenticate`` values for a 401 (gRPC: trailers)
        self.challenges, self._message = challenges(authenticator)

    def unauthenticated(self) -> UnauthenticatedError:
        return UnauthenticatedError(self._message)

    async def identify(self, headers: Mapping[str, str]) -> Identity | None:
        """The caller's identity, ``None`` without credentials; bad ones raise
        :class:`~apcore_a2a.errors.UnauthenticatedError`."""
        try:
            return await self.authenticator.authenticate(headers)
        except InvalidCredentials as exc:
            logger.debug("rejected credentials: %s", exc)
            raise self.unauthenticated() from None

    def admit(self, identity: Identity | None, *, anonymous_ok: bool) -> None:
        """Raise unless *identity* may use the agent. Anonymous callers pass only when
        *anonymous_ok* and the agent requires no role or scope."""
        if identity is None:
            if anonymous_ok and not self.access:
                return
            raise self.unauthenticated()
        reason = self.access.denial(identity)
        if reason is not None:
            raise PermissionDeniedError(reason)
