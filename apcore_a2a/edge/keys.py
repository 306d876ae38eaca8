"""The one rule for what a text column holds, and the form a caller key takes when it
cannot be held (the edge's: the task owner and the quota key are the call's, read by the
stores of every room)."""

from __future__ import annotations

import hashlib

#: The SDK's SQL stores keep the owner in a VARCHAR(255) column; quota slots their subject.
MAX_KEY_CHARS = 255
#: What the stored form of a key no column holds starts with (:func:`stored_key`).
HASHED_PREFIX = "sha256:"


def unstorable(value: str, limit: int | None = None) -> str | None:
    """Why a text column of *limit* characters (``None``: unbounded) cannot hold *value*,
    worded to follow the value's name; ``None`` when it can. Every store refuses alike:
    PostgreSQL text holds no NUL, and no database takes a lone surrogate (UTF-8 has none;
    JSON's ``"\\ud800"`` and a decoded page token can carry one)."""
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode()
    except UnicodeEncodeError:
        return "is not valid Unicode"
    if limit is not None and len(value) > limit:
        return f"is longer than the store holds: at most {limit} characters, got {len(value)}"
    return None


def stored_key(key: str, limit: int | None = MAX_KEY_CHARS) -> str:
    """*key* (a task owner, a quota key) as every store holds it: itself, or
    ``"sha256:<hex>"`` of it when no column of *limit* characters (``None``: unbounded)
    can (a token's ``sub`` with a NUL or a lone surrogate, which JSON spells, or too
    long). A stored key maps to
    itself, so applying this twice changes nothing; the hash covers the whole key (lone
    surrogates as their own bytes), so two keys never share one form. No key in another
    form starts with ``sha256:`` (``execution/identity.py`` hashes such a bare id)."""
    if unstorable(key, limit) is None:
        return key
    return hashed_key(key)


def hashed_key(key: str) -> str:
    """``"sha256:<hex>"`` of the whole of *key* (lone surrogates as their own bytes)."""
    return HASHED_PREFIX + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
