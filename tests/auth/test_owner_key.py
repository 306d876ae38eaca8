"""The task owner key: how the caller authenticated plus the identity id, injective, short."""

from __future__ import annotations

import hashlib

from apcore import Identity

from apcore_a2a.auth import APIKeyAuthenticator, owner_key, stamp_identity
from apcore_a2a.execution.identity import MAX_OWNER_CHARS, Caller


def tag(issuer: str) -> str:
    return hashlib.sha256(issuer.encode()).hexdigest()[:16]


def test_formats() -> None:
    assert owner_key(stamp_identity(Identity(id="alice"), "apikey")) == "apikey::alice"
    jwt_alice = stamp_identity(Identity(id="alice"), "jwt", "https://idp.example/")
    assert owner_key(jwt_alice) == f"jwt:{tag('https://idp.example/')}:alice"
    assert owner_key(stamp_identity(Identity(id="alice"), "jwt")) == "jwt::alice"
    # A custom authenticator that stamps nothing keeps the bare id (as before).
    assert owner_key(Identity(id="alice")) == "alice"
    assert Caller(jwt_alice).user_name == owner_key(jwt_alice)
    assert Caller(jwt_alice).identity.id == "alice"


def test_ids_with_separators_do_not_collide() -> None:
    a = stamp_identity(Identity(id="b:alice"), "jwt", "https://a/")
    b = stamp_identity(Identity(id="alice"), "jwt", "https://a/b")
    assert owner_key(a) != owner_key(b)
    assert owner_key(stamp_identity(Identity(id=":alice"), "apikey")) != owner_key(
        stamp_identity(Identity(id="alice"), "apikey")
    )


def test_long_owners_fit_the_stores_column() -> None:
    long_id = "u" * 400
    key = owner_key(stamp_identity(Identity(id=long_id), "jwt", "https://idp/"))
    assert len(key) <= MAX_OWNER_CHARS and key.startswith("sha256:")
    other = owner_key(stamp_identity(Identity(id=long_id + "x"), "jwt", "https://idp/"))
    assert other != key
    edge = "e" * (MAX_OWNER_CHARS - len("apikey::"))
    assert owner_key(stamp_identity(Identity(id=edge), "apikey")) == "apikey::" + edge


def test_stamp_replaces_what_the_caller_put_in_attrs() -> None:
    forged = Identity(id="alice", attrs={"auth_scheme": "apikey", "auth_issuer": "x", "k": 1})
    stamped = stamp_identity(forged, "jwt")
    assert stamped.attrs == {"auth_scheme": "jwt", "k": 1}
    assert forged.attrs["auth_scheme"] == "apikey", "the original is not changed"


async def test_api_key_identities_are_stamped_and_copied() -> None:
    auth = APIKeyAuthenticator({"k-0123456789abcdef": Identity(id="ops", roles=("admin",))})
    first = await auth.authenticate({"x-api-key": "k-0123456789abcdef"})
    assert first is not None and owner_key(first) == "apikey::ops"
    first.attrs["tampered"] = True
    second = await auth.authenticate({"x-api-key": "k-0123456789abcdef"})
    assert second is not None and "tampered" not in second.attrs


def test_owners_no_store_holds_are_hashed_apart() -> None:
    """A ``sub`` with a NUL or a lone surrogate (JSON spells both) is kept under its
    SHA-256; no other caller's literal key is that form, and no two odd ones share it."""
    odd = {
        owner_key(stamp_identity(Identity(id=sub), "jwt"))
        for sub in ("\ud800", "\udc00", "\ud800\udc00", "\U00010000", "a\x00b", "a\x00c")
    } - {"jwt::\U00010000"}
    assert len(odd) == 5 and all(k.startswith("sha256:") and len(k) == 71 for k in odd)
    for key in odd:
        key.encode()  # every store holds it
        # a custom authenticator's bare id spelled as that form is another owner
        assert owner_key(Identity(id=key)).startswith("id:")
        assert owner_key(Identity(id=key.upper())).startswith("id:")
        assert owner_key(stamp_identity(Identity(id=key), "jwt")) == f"jwt::{key}"
    assert owner_key(stamp_identity(Identity(id="\U00010000"), "jwt")) == "jwt::\U00010000"
