"""Static API keys in a request header, each bound to an apcore ``Identity``."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
from collections.abc import Iterable, Mapping

from a2a.types import APIKeySecurityScheme, SecurityScheme
from apcore import Identity

from apcore_a2a.auth.authenticator import InvalidCredentials, header_value, stamp_identity

__all__ = ["APIKeyAuthenticator", "parse_api_key_entries"]

logger = logging.getLogger("apcore_a2a.auth")

_MIN_KEY_CHARS = 16
#: Identity type given to keys configured with a bare identity id.
API_KEY_IDENTITY_TYPE = "service"
#: ``auth_scheme`` of API-key identities (their tasks are owned by ``apikey::<id>``).
API_KEY_SCHEME = "apikey"


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def anonymous_key_id(key: str) -> str:
    """A stable identity id for a key configured without one, derived without revealing it."""
    return "apikey-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def parse_api_key_entries(entries: Iterable[str]) -> dict[str, Identity]:
    """Parse settings entries ``"key"`` or ``"key=identity_id"`` into ``{key: Identity}``."""
    keys: dict[str, Identity] = {}
    for raw in entries:
        key, sep, ident = raw.strip().partition("=")
        key, ident = key.strip(), ident.strip()
        if not key or (sep and not ident):
            raise ValueError("API key entries must look like 'KEY' or 'KEY=IDENTITY_ID'")
        keys[key] = Identity(id=ident or anonymous_key_id(key), type=API_KEY_IDENTITY_TYPE)
    return keys


class APIKeyAuthenticator:
    """Accept requests whose *header* carries one of the configured keys.

    *keys* maps each key to an ``Identity`` or to a bare identity id (which becomes an
    identity of type ``"service"``). Keys are held only as SHA-256 digests and compared
    in constant time. Identities are stamped ``auth_scheme="apikey"``, so their tasks are
    owned by ``apikey::<id>`` (see :func:`~apcore_a2a.auth.owner_key`).

    Example::

        APIKeyAuthenticator(keys={"k-7f1c...": Identity(id="billing", roles=("admin",))})
    """

    def __init__(
        self,
        keys: Mapping[str, Identity | str],
        *,
        header: str = "X-API-Key",
    ) -> None:
        if not keys:
            raise ValueError("APIKeyAuthenticator needs at least one key")
        self.header = header
        self._keys: list[tuple[bytes, Identity]] = []
        for key, who in keys.items():
            if not key:
                raise ValueError("API keys must not be empty")
            if len(key) < _MIN_KEY_CHARS:
                logger.warning(
                    "an API key is %d characters long; %d or more are recommended",
                    len(key),
                    _MIN_KEY_CHARS,
                )
            identity = (
                who if isinstance(who, Identity) else Identity(id=who, type=API_KEY_IDENTITY_TYPE)
            )
            self._keys.append((_digest(key), stamp_identity(identity, API_KEY_SCHEME)))

    def security_schemes(self) -> dict[str, SecurityScheme]:
        """``{"apiKey": API key in the configured header}``."""
        return {
            "apiKey": SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(
                    location="header", name=self.header, description="Static API key"
                )
            )
        }

    async def authenticate(self, headers: Mapping[str, str]) -> Identity | None:
        """The identity bound to the presented key; see :class:`~apcore_a2a.auth.Authenticator`."""
        presented = header_value(headers, self.header)
        if presented is None:
            return None
        digest = _digest(presented.strip())
        found: Identity | None = None
        # Compare against every key so the time taken does not depend on which one matched.
        for candidate, identity in self._keys:
            if hmac.compare_digest(candidate, digest):
                found = identity
        if found is None:
            raise InvalidCredentials("unknown API key")
        # A copy, so a module mutating identity.attrs cannot affect later requests.
        return dataclasses.replace(found)
