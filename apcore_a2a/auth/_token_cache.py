"""A small LRU of recently verified bearer tokens.

Verifying a JWT costs tens to hundreds of microseconds (parsing plus the signature); a
client usually sends the same token on every request until it expires. Entries are keyed
by the token's SHA-256 (the token itself is not kept) and never outlive the token's
``exp`` (plus leeway) or *max_age* seconds, whichever comes first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections import OrderedDict
from typing import Any

from apcore import Identity

__all__ = ["VerifiedTokenCache"]


class VerifiedTokenCache:
    def __init__(self, size: int, max_age: float) -> None:
        self.size = size
        self.max_age = max_age
        self._entries: OrderedDict[bytes, tuple[float, Identity]] = OrderedDict()

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
        key = self._key(token)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if time.time() >= entry[0]:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
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
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
