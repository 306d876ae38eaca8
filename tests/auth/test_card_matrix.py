"""Every card call x every way auth is set up x every kind of caller, on real servers.

The rule (docs/auth.md, "Agent cards by binding"): the public card (A2A 1.0.1 §8.2, the
well-known URI; its 0.3 copy) is served to everyone, credentials or not, good or bad, and
is the same for everyone; every form of the extended card (spec §13.3 "MUST require
authentication"; 0.3 §7.10 names gRPC ``GetAgentCard`` and REST ``/v1/card`` as forms of
``agent/getAuthenticatedExtendedCard``) needs valid credentials wherever auth is
configured, ``require_auth=false`` included, and is the SDK's "unsupported operation"
without auth. ``admin.reset`` is on the admin's extended card only, so which card came back
is observable.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2
from a2a.types import a2a_pb2

from apcore_a2a import A2AServerFactory
from tests._support import TLS, free_port, threaded_server
from tests.bindings._grpc import stubs

from .agent import build_executor

ADMIN_KEY = "admin-" + secrets.token_hex(16)
MODES = {
    "no-auth": {},
    "require-auth": {"api_keys": (f"{ADMIN_KEY}=root:admin",)},
    "optional-auth": {"api_keys": (f"{ADMIN_KEY}=root:admin",), "require_auth": False},
}
CREDENTIALS = {"none": {}, "valid": {"X-API-Key": ADMIN_KEY}, "bad": {"X-API-Key": "k-" * 12}}
PUBLIC = ["well-known", "well-known 0.3"]
EXTENDED = [
    "jsonrpc",
    "jsonrpc 0.3",
    "rest",
    "rest tenant",
    "rest 0.3",
    "legacy",
    "grpc",
    "grpc 0.3",
]
PUBLIC_SKILLS = ["demo.add", "demo.wait"]
EXTENDED_SKILLS = ["admin.reset", "demo.add", "demo.wait"]
_HTTP = {  # endpoint: (method, path, A2A-Version, JSON-RPC method)
    "well-known": ("GET", "/.well-known/agent-card.json", "1.0", None),
    "well-known 0.3": ("GET", "/.well-known/agent.json", "0.3", None),
    "jsonrpc": ("POST", "/", "1.0", "GetExtendedAgentCard"),
    "jsonrpc 0.3": ("POST", "/", "0.3", "agent/getAuthenticatedExtendedCard"),
    "rest": ("GET", "/extendedAgentCard", "1.0", None),
    "rest tenant": ("GET", "/acme/extendedAgentCard", "1.0", None),
    "rest 0.3": ("GET", "/v1/card", "0.3", None),
    "legacy": ("GET", "/agent/authenticatedExtendedCard", "0.3", None),
}


def expected(mode: str, credentials: str, endpoint: str) -> Any:
    if endpoint in PUBLIC:
        return PUBLIC_SKILLS
    if mode == "no-auth":
        return "not found" if endpoint == "legacy" else "unsupported"
    return EXTENDED_SKILLS if credentials == "valid" else "unauthenticated"


@pytest.fixture(scope="module")
def agents() -> Iterator[dict[str, tuple[str, str]]]:
    """One agent per mode: ``mode -> (HTTP URL, gRPC address)``."""
    with contextlib.ExitStack() as stack:
        served = {}
        for mode, settings in MODES.items():
            port, grpc_port = free_port(), free_port()
            app, _ = A2AServerFactory(
                build_executor(), environ={}, port=port, grpc_port=grpc_port, **settings
            ).create()
            url = stack.enter_context(threaded_server(app, port=port))
            served[mode] = (url, f"127.0.0.1:{grpc_port}")
        yield served


def _skills(card: dict[str, Any]) -> list[str]:
    return sorted(skill["id"] for skill in card["skills"])


async def _over_http(url: str, endpoint: str, headers: dict[str, str]) -> Any:
    method, path, version, rpc = _HTTP[endpoint]
    body = {"jsonrpc": "2.0", "id": 7, "method": rpc, "params": {}} if rpc else None
    async with httpx.AsyncClient(base_url=url, verify=TLS) as http:
        answer = await http.request(
            method, path, json=body, headers={**headers, "A2A-Version": version}
        )
    data = answer.json()
    error = data.get("error") if isinstance(data, dict) else None
    if answer.status_code == 401:
        assert answer.headers["www-authenticate"] == 'ApiKey header="X-API-Key"'
        assert error["code"] == (-32093 if rpc else 401), data
        return "unauthenticated"
    if rpc and error is not None:
        assert (answer.status_code, error["code"]) == (200, -32004), data
        return "unsupported"
    if answer.status_code == 400:
        assert error["status"] == "FAILED_PRECONDITION", data
        return "unsupported"
    if answer.status_code == 404:
        return "not found"
    assert answer.status_code == 200, data
    return _skills(data["result"] if rpc else data)


async def _over_grpc(address: str, endpoint: str, headers: dict[str, str]) -> Any:
    metadata = tuple((name.lower(), value) for name, value in headers.items())
    async with stubs(address) as (v1, v03):
        call = (
            v03.GetAgentCard(a2a_v0_3_pb2.GetAgentCardRequest(), metadata=metadata)
            if endpoint == "grpc 0.3"
            else v1.GetExtendedAgentCard(a2a_pb2.GetExtendedAgentCardRequest(), metadata=metadata)
        )
        try:
            return sorted(skill.id for skill in (await call).skills)
        except grpc.aio.AioRpcError as error:
            refused = error
    if refused.code() == grpc.StatusCode.UNAUTHENTICATED:
        challenge = refused.trailing_metadata().get("www-authenticate")
        assert challenge == 'ApiKey header="X-API-Key"'
        return "unauthenticated"
    assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION, refused
    return "unsupported"


@pytest.mark.parametrize("endpoint", PUBLIC + EXTENDED)
@pytest.mark.parametrize("credentials", list(CREDENTIALS))
@pytest.mark.parametrize("mode", list(MODES))
async def test_card_answers(
    agents: dict[str, tuple[str, str]], mode: str, credentials: str, endpoint: str
) -> None:
    url, address = agents[mode]
    headers = CREDENTIALS[credentials]
    if endpoint.startswith("grpc"):
        answer = await _over_grpc(address, endpoint, headers)
    else:
        answer = await _over_http(url, endpoint, headers)
    assert answer == expected(mode, credentials, endpoint)
