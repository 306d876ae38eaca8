"""Validly signed tokens with odd claim values are served or refused, never a 500: an ``exp``
too large for a float, and an ``iss`` or a long ``sub`` that is not valid Unicode (a lone
surrogate, which JSON can spell), on JSON-RPC, REST and gRPC."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Iterator

import grpc
import httpx
import pytest
from a2a.types import ListTasksRequest

from tests._support import TLS, free_port
from tests.bindings._grpc import failure, stubs

from .agent import serve_agent
from .keys import HMAC_SECRET

FAR = "1" + "0" * 400  # a JSON integer no float holds


def signed(payload: str) -> str:
    """An HS256 token over exactly the JSON text *payload* (PyJWT cannot write these)."""
    seg = [base64.urlsafe_b64encode(p.encode()).rstrip(b"=") for p in ('{"alg":"HS256"}', payload)]
    signing_input = b".".join(seg)
    sig = hmac.new(HMAC_SECRET.encode(), signing_input, hashlib.sha256).digest()
    return (signing_input + b"." + base64.urlsafe_b64encode(sig).rstrip(b"=")).decode()


#: each case's claims (JSON text); ``{exp}`` is ten minutes ahead, filled when the test runs
CLAIMS = {
    "exp beyond a float": f'{{{{"sub": "alice", "exp": {FAR}}}}}',
    "iss a lone surrogate": '{{"sub": "alice", "iss": "idp-\\ud800", "exp": {exp}}}',
    "a long sub with a lone surrogate": '{{"sub": "\\ud800' + "a" * 300 + '", "exp": {exp}}}',
}


@pytest.fixture(scope="module", params=[0, 3600], ids=["no max lifetime", "max lifetime"])
def agent(request: pytest.FixtureRequest) -> Iterator[tuple[str, str, int]]:
    grpc_port = free_port()
    lifetime = request.param
    with serve_agent(
        auth_key=HMAC_SECRET, grpc_port=grpc_port, auth_max_token_lifetime=lifetime
    ) as url:
        yield url, f"127.0.0.1:{grpc_port}", lifetime


@pytest.mark.parametrize("case", list(CLAIMS))
async def test_odd_claims_are_served_or_refused_on_every_binding(
    agent: tuple[str, str, int], case: str
) -> None:
    url, address, lifetime = agent
    # An exp ten to the 400th seconds ahead is valid, unless a maximum lifetime refuses it.
    refused = lifetime > 0 and case == "exp beyond a float"
    token = signed(CLAIMS[case].format(exp=int(time.time()) + 600))
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    call = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    async with httpx.AsyncClient(base_url=url, headers=headers, verify=TLS) as http:
        for _ in range(2):  # the second from the verified-token cache
            answers = [await http.post("/", json=call), await http.get("/tasks")]
            assert [a.status_code for a in answers] == [401 if refused else 200] * 2
            if not refused:
                assert answers[0].json()["result"]["tasks"] == []
                assert answers[1].json()["tasks"] == []
    async with stubs(address) as (v1, _v03):
        metadata = (("authorization", f"Bearer {token}"),)
        if refused:
            error = await failure(v1.ListTasks(ListTasksRequest(), metadata=metadata))
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        else:
            assert list((await v1.ListTasks(ListTasksRequest(), metadata=metadata)).tasks) == []
