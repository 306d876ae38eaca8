"""An authenticator of the host's own that sets no ``auth_scheme`` owns tasks by the bare
``identity.id``: an id spelled like a derived owner (``anonymous:ip:127.0.0.1``, ``ip:...``,
``jwt:<tag>:alice``, ``sha256:...``) must not become that owner, nor that quota key, or a
user who chooses their own name (a sign-up form) reads the tasks of whoever owns it."""

from __future__ import annotations

from collections.abc import Mapping

import httpx
import pytest
from a2a.types import SecurityScheme
from apcore import Identity

from apcore_a2a.auth import owner_key
from apcore_a2a.execution.identity import address_key, caller_key
from tests._support import TLS
from tests.push._agent import add_message, push_agent, rpc

TASK_NOT_FOUND = -32001


class Users:
    """Whoever ``X-User`` names (as a sign-up form lets users name themselves)."""

    async def authenticate(self, headers: Mapping[str, str]) -> Identity | None:
        name = headers.get("x-user")
        return Identity(id=name) if name is not None else None

    def security_schemes(self) -> dict[str, SecurityScheme]:
        return {}


async def test_a_bare_id_spelled_as_an_anonymous_owner_is_not_that_owner() -> None:
    async with (
        push_agent(auth=Users(), require_auth=False) as (base, _),
        httpx.AsyncClient(verify=TLS) as http,
    ):
        started = await rpc(http, base, "SendMessage", {"message": add_message()})
        task_id = started["result"]["task"]["id"]
        mine = await rpc(http, base, "GetTask", {"id": task_id})
        assert mine["result"]["id"] == task_id  # its anonymous owner reads it
        for name in ("anonymous:ip:127.0.0.1", "Anonymous:ip:127.0.0.1"):
            http.headers["X-User"] = name
            theirs = await rpc(http, base, "GetTask", {"id": task_id})
            assert theirs.get("error", {}).get("code") == TASK_NOT_FOUND, (name, theirs)
        # An ordinary name keeps its bare owner, and its own tasks.
        http.headers["X-User"] = "alice"
        own = (await rpc(http, base, "SendMessage", {"message": add_message()}))["result"]
        assert (await rpc(http, base, "GetTask", {"id": own["task"]["id"]}))["result"]["id"]


DERIVED = [
    owner_key(Identity(id="alice", attrs={"auth_scheme": "jwt"})),
    owner_key(Identity(id="billing", attrs={"auth_scheme": "apikey"})),
    owner_key(Identity(id="alice", attrs={"auth_scheme": "jwt", "auth_issuer": "https://idp/"})),
    address_key("127.0.0.1"),
    address_key("2001:db8::7"),
    "anonymous:" + address_key("127.0.0.1"),
    owner_key(Identity(id="x" * 300)),
    "",  # the SDK's one anonymous owner, and tasks stored anonymously by older versions
]


@pytest.mark.parametrize("derived", DERIVED)
def test_a_bare_id_is_no_derived_owner_or_quota_key(derived: str) -> None:
    for spelled in (derived, derived.upper()):  # a case-insensitive column (MySQL) too
        bare = Identity(id=spelled)
        assert owner_key(bare).casefold() not in {d.casefold() for d in DERIVED}
        assert caller_key(bare, None).casefold() not in {d.casefold() for d in DERIVED}


@pytest.mark.parametrize("plain", ["alice", "accounts.google.com:1234", "auth0|5f7c", "a" * 255])
def test_an_ordinary_bare_id_is_its_own_owner(plain: str) -> None:
    assert owner_key(Identity(id=plain)) == plain
