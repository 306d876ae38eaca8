"""Mapping verified JWT claims onto an apcore ``Identity``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apcore import Identity

from apcore_a2a.auth.access import SCOPES_ATTR, words

__all__ = ["ClaimMapping"]

_MISSING = object()


def _claim(claims: Mapping[str, Any], name: str) -> Any:
    """Look a claim up by exact name, then as a dotted path (``realm_access.roles``).

    Exact names come first because namespaced claims such as
    ``https://example.com/roles`` contain dots themselves.
    """
    if name in claims:
        return claims[name]
    node: Any = claims
    for part in name.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


@dataclass(frozen=True, slots=True)
class ClaimMapping:
    """Which claims become ``Identity.id``, ``type``, ``roles`` and ``attrs``.

    Claim names may be dotted paths into nested objects. ``roles`` accepts a list of
    strings or a space-separated string (the OAuth ``scope`` style). The first of the
    ``scopes`` claims present (``scope`` of RFC 9068, else ``scp``) becomes
    ``attrs["scopes"]``, which ``required_scopes`` is checked against.

    Example::

        ClaimMapping(roles="realm_access.roles", attrs=("email", "tenant"))
    """

    id: str = "sub"
    type: str = "type"
    roles: str = "roles"
    attrs: tuple[str, ...] = ()
    default_type: str = "user"
    scopes: tuple[str, ...] = ("scope", "scp")

    def to_identity(self, claims: Mapping[str, Any]) -> Identity | None:
        """Build the identity, or ``None`` when the id claim is missing or not a string."""
        ident = _claim(claims, self.id)
        if not isinstance(ident, str) or not ident:
            return None
        kind = _claim(claims, self.type)
        if not isinstance(kind, str) or not kind:
            kind = self.default_type
        roles = words(_claim(claims, self.roles))
        attrs: dict[str, Any] = {}
        found = (_claim(claims, name) for name in self.scopes)
        granted = next((v for v in found if v is not _MISSING), _MISSING)
        if granted is not _MISSING:
            attrs[SCOPES_ATTR] = words(granted)
        for name in self.attrs:
            value = _claim(claims, name)
            if value is not _MISSING:
                attrs[name] = value
        return Identity(id=ident, type=kind, roles=roles, attrs=attrs)
