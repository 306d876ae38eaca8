"""A credential header given twice is refused on every binding, whichever copy is valid:
which one counts would be a guess, and a proxy in front may have guessed the other."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2
from a2a.types import GetTaskRequest

from tests._support import TLS, free_port
from tests.bindings._grpc import failure, stubs

from .agent import serve_agent
from .keys import HMAC_SECRET, hs_plain

KEY = "k-" + secrets.token_hex(16)
# Made at import: valid for a day, not hs_plain's 10 minutes, or a long test run (a loaded
# CI machine: 30 minutes) reaches these tests with them expired.
DAY = int(time.time()) + 86_400
ALICE, BOB = (f"Bearer {hs_plain(sub=who, exp=DAY)}" for who in ("alice", "bob"))
PAIRS = {
    "valid, then bad": [("authorization", ALICE), ("authorization", "Bearer not-a-jwt")],
    "bad, then valid": [("authorization", "Bearer not-a-jwt"), ("authorization", ALICE)],
    "two identities": [("authorization", ALICE), ("authorization", BOB)],
    "the same token twice": [("authorization", ALICE), ("Authorization", ALICE)],
    "two API keys": [("x-api-key", KEY), ("x-api-key", "k-" + "0" * 32)],
}
VALID = (ALICE, KEY)
#: (path or JSON-RPC method, A2A version) of a GetTask for a task that does not exist
HTTP_CALLS = [("/", "1.0"), ("/", "0.3"), ("/tasks/nope", "1.0"), ("/v1/tasks/nope", "0.3")]


@pytest.fixture(scope="module")
def agent() -> Iterator[tuple[str, str]]:
    grpc_port = free_port()
    with serve_agent(auth_key=HMAC_SECRET, api_keys=[f"{KEY}=svc"], grpc_port=grpc_port) as url:
        yield url, f"127.0.0.1:{grpc_port}"


async def http_status(url: str, path: str, version: str, headers: list[tuple[str, str]]) -> int:
    method = "GetTask" if version == "1.0" else "tasks/get"
    call = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": "nope"}}
    announced = [("A2A-Version", "1.0")] if version == "1.0" else []
    async with httpx.AsyncClient(base_url=url, verify=TLS) as http:
        if path == "/":
            answer = await http.post(path, json=call, headers=[*headers, *announced])
        else:
            answer = await http.get(path, headers=[*headers, *announced])
    if answer.status_code == 401:
        assert answer.headers.get_list("www-authenticate") == [
            "Bearer",
            'ApiKey header="X-API-Key"',
        ]
    return answer.status_code


async def grpc_codes(address: str, metadata: list[tuple[str, str]]) -> list[grpc.StatusCode]:
    async with stubs(address) as (v1, v03):
        calls = [
            v1.GetTask(GetTaskRequest(id="nope"), metadata=metadata),
            v03.GetTask(a2a_v0_3_pb2.GetTaskRequest(name="tasks/nope"), metadata=metadata),
        ]
        return [(await failure(call)).code() for call in calls]


@pytest.mark.parametrize("pair", list(PAIRS))
async def test_a_repeated_credential_header_is_refused(agent: tuple[str, str], pair: str) -> None:
    url, address = agent
    headers = PAIRS[pair]
    for path, version in HTTP_CALLS:
        # alone, the valid copy is served: the task is not found (JSON-RPC answers 200)
        alone = await http_status(url, path, version, [h for h in headers if h[1] in VALID][:1])
        assert alone in (200, 404), (path, version)
        assert await http_status(url, path, version, headers) == 401, (path, version)
    metadata = [(name.lower(), value) for name, value in headers]
    assert await grpc_codes(address, metadata) == [grpc.StatusCode.UNAUTHENTICATED] * 2
