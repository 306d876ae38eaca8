"""A small LRU of recently verified bearer tokens (``cachetools.TLRUCache``).

Verifying a JWT costs tens to hundreds of microseconds (parsing plus the signature); a
client usually sends the same token on every request until it expires. Entries are keyed
by the token's SHA-256 (the token itself is not kept) and never outlive the token's
``exp`` (plus leeway) or *max_age* seconds, whichever comes first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from typing import Any

from apcore import Identity
from cachetools import TLRUCache

__all__ = ["VerifiedTokenCache"]


class VerifiedTokenCache:
    def __init__(self, size: int, max_age: float) -> None:
        self.size = size
        self.max_age = max_age
        # Each entry lives until its own deadline: min(now + max_age, exp + leeway).
        self._entries: TLRUCache[bytes, tuple[float, Identity]] = TLRUCache(
            maxsize=max(size, 1), ttu=lambda _key, value, _now: value[0], timer=time.time
        )

    @property
    def enabled(self) -> bool:
        return self.size > 0 and self.max_age > 0

    @staticmethod
    def _key(token: str) -> bytes:
        return hashlib.sha256(token.encode("utf-8")).digest()

    def get(self, token: str) -> Identity | None:
        """A fresh copy of the cached identity, or ``None`` (missing or expired)."""
        if not self.enabled:
            return None
        entry = self._entries.get(self._key(token))
        if entry is None:
            return None
        # A copy, so a module mutating identity.attrs cannot affect later requests.
        return dataclasses.replace(entry[1])

    def put(self, token: str, identity: Identity, claims: dict[str, Any], leeway: float) -> None:
        if not self.enabled:
            return
        expires = time.time() + self.max_age
        exp = claims.get("exp")
        if isinstance(exp, int | float) and not isinstance(exp, bool):
            expires = min(expires, float(exp) + leeway)
        self._entries[self._key(token)] = (expires, dataclasses.replace(identity))
