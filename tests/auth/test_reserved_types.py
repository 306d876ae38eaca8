"""No credential makes its caller apcore's ``system`` caller: the ACL's ``@system`` pattern
(and an ``identity_types: [system]`` condition) matches ``identity.type == "system"``, so a
token whose ``type`` claim says so, from any issuer the agent trusts, would be let into what
apcore keeps for the host's own calls. Such a credential is refused (401) on every binding
and version, whichever authenticator made the identity."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apcore
import grpc
import httpx
import pytest
from a2a.client import A2AClientError
from a2a.compat.v0_3 import a2a_v0_3_pb2
from a2a.types import TaskState
from a2a.utils.errors import MethodNotFoundError
from apcore import ACL, ACLRule, Executor, Identity, Registry

from apcore_a2a import A2AServerFactory
from apcore_a2a.auth import APIKeyAuthenticator, ClaimMapping, JWTAuthenticator
from apcore_a2a.execution.identity import RESERVED_IDENTITY_TYPES
from tests._modules import Add
from tests._support import TLS, free_port, threaded_server
from tests.bindings._grpc import failure, stubs

from .agent import BINDINGS, Reset, message, sdk_client, send
from .keys import HMAC_SECRET, bearer, hs_plain
from .probe import serve_probe

DAY = int(time.time()) + 86_400
SYSTEM = hs_plain(sub="mallory", type="system", exp=DAY)
SERVICE = hs_plain(sub="billing", type="service", exp=DAY)


def build_executor() -> Executor:
    registry = Registry()
    registry.register("vault.open", Reset())  # answers who called
    registry.register("demo.add", Add())
    acl = ACL(
        rules=[
            ACLRule(callers=["@system"], targets=["vault.*"], effect="allow"),
            ACLRule(callers=["@external"], targets=["demo.*"], effect="allow"),
        ],
        default_effect="deny",
    )
    return Executor(registry, acl=acl)


@pytest.fixture(scope="module")
def agent() -> Iterator[tuple[str, str]]:
    port, grpc_port = free_port(), free_port()
    app, _ = A2AServerFactory(
        build_executor(),
        environ={},
        port=port,
        name="vault",
        auth_key=HMAC_SECRET,
        grpc_port=grpc_port,
    ).create()
    with threaded_server(app, port=port) as url:
        yield url, f"127.0.0.1:{grpc_port}"


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_a_token_of_type_system_is_refused_on_http(
    agent: tuple[str, str], binding: str, version: str
) -> None:
    url, _ = agent
    async with sdk_client(url, binding, version, bearer(SYSTEM)) as client:
        with pytest.raises(A2AClientError, match="401"):
            await send(client, message("vault.open"))
    # A service's token is served, and the vault is the system's alone.
    async with sdk_client(url, binding, version, bearer(SERVICE)) as client:
        added = await send(client, message("demo.add", {"a": 2, "b": 3}))
        assert added.status.state == TaskState.TASK_STATE_COMPLETED
        with pytest.raises(MethodNotFoundError):  # what the ACL's refusal looks like
            await send(client, message("vault.open"))


async def test_a_token_of_type_system_is_refused_on_grpc(agent: tuple[str, str]) -> None:
    _, address = agent
    async with stubs(address) as (v1, v03):
        system = (("authorization", f"Bearer {SYSTEM}"),)
        error = await failure(v1.SendMessage(message("vault.open"), metadata=system))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        assert ("www-authenticate", "Bearer") in list(error.trailing_metadata() or ())
        legacy = a2a_v0_3_pb2.GetTaskRequest(name="tasks/nope")
        error = await failure(v03.GetTask(legacy, metadata=system))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        service = (("authorization", f"Bearer {SERVICE}"),)
        error = await failure(v03.GetTask(legacy, metadata=service))
        assert error.code() == grpc.StatusCode.NOT_FOUND  # served: there is no such task
        error = await failure(v1.SendMessage(message("vault.open"), metadata=service))
        assert error.code() == grpc.StatusCode.NOT_FOUND  # the ACL's refusal


class Claims:
    """An authenticator of the host's own that says whatever type it is told to."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    async def authenticate(self, headers: Any) -> Identity | None:
        return Identity(id="batch", type=self.kind) if "authorization" in headers else None

    def security_schemes(self) -> dict[str, Any]:
        return {}


@pytest.mark.parametrize("kind", ["system", "System", " system "])
async def test_no_authenticator_makes_a_system_caller(kind: str) -> None:
    jwt = JWTAuthenticator(HMAC_SECRET)
    token = hs_plain(sub="mallory", type=kind)
    for authenticator in (jwt, Claims(kind)):
        async with serve_probe(authenticator) as base, httpx.AsyncClient(verify=TLS) as http:
            answer = await http.get(base + "/whoami", headers=bearer(token))
            assert answer.status_code == 401, (authenticator, answer.text)
    async with serve_probe(Claims("service")) as base, httpx.AsyncClient(verify=TLS) as http:
        answer = await http.get(base + "/whoami", headers=bearer(token))
        assert answer.json()["scope"]["type"] == "service"


def test_configuration_cannot_name_a_system_caller_either() -> None:
    with pytest.raises(ValueError, match="type 'system'"):
        APIKeyAuthenticator({"k-" + "7" * 30: Identity(id="cron", type="system")})
    with pytest.raises(ValueError, match="reserved by apcore"):
        ClaimMapping(default_type="system")


@pytest.mark.parametrize("name", ["scopes", "auth_scheme", "auth_issuer"])
def test_a_claim_cannot_stand_in_for_what_the_authenticator_sets(name: str) -> None:
    # attrs=("scopes",) would let a claim named "scopes" grant what required_scopes asks
    # for, beside the scope claim the identity provider issues.
    with pytest.raises(ValueError, match=repr(name)):
        ClaimMapping(attrs=("email", name))


def test_apcore_gives_meaning_to_no_other_identity_type() -> None:
    # A tripwire: the day apcore branches on another identity type, that type is one a
    # credential must not name either (RESERVED_IDENTITY_TYPES).
    root = Path(apcore.__file__).parent
    compared = re.compile(r"""identity\.type\s*(?:==|!=|in)\s*[(\[{]?\s*["']([^"']+)["']""")
    found = {kind for path in root.rglob("*.py") for kind in compared.findall(path.read_text())}
    assert found == RESERVED_IDENTITY_TYPES
