"""Who may use the agent at all: roles and OAuth scopes required of every caller.

Authentication says who the caller is; this says whether that caller may use the agent
(any skill, the extended card included). It is checked on every binding before the call
reaches the SDK, and a caller who fails it gets 403 / ``PERMISSION_DENIED``. Per-skill
rules stay with apcore's ACL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apcore import Identity

    from apcore_a2a.settings import Settings

__all__ = ["SCOPES_ATTR", "AgentAccess", "scopes_of"]

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
