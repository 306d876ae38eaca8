"""A stream of a caller whose identity no database holds is served in cluster mode with a
per-caller stream quota, never a 500 (a real server, PostgreSQL).

A validly signed token can carry a ``sub`` with a lone surrogate or a NUL (JSON spells both).
Such a caller's owner and quota key are the SHA-256 form (``edge/keys.py``). Before, in
cluster mode the stream's quota slot was taken first, in the shared database, whose driver
refused the key: HTTP 500, with the driver's traceback (the key quoted) logged at ERROR
(then its messages were refused -32602; every operation is served now:
``test_odd_owner_stores.py``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from a2a.types import TaskState

from tests._postgres import pg_schema_url
from tests._support import TLS, free_port
from tests.bindings._grpc import stubs

from .agent import message, serve_agent
from .keys import HMAC_SECRET
from .test_claim_edges import signed

asyncpg = pytest.importorskip("asyncpg")


@pytest.fixture(scope="module")
def agent() -> Iterator[tuple[str, str]]:
    grpc_port = free_port()
    with (
        pg_schema_url(agents=1) as url,
        serve_agent(
            auth_key=HMAC_SECRET,
            task_store=url,
            cluster=True,
            max_streams_per_caller=1,
            grpc_port=grpc_port,
        ) as base,
    ):
        yield base, f"127.0.0.1:{grpc_port}"


def _message() -> dict[str, object]:
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"a": 1, "b": 2}}],
        "metadata": {"skillId": "demo.add"},
    }


@pytest.mark.parametrize("sub", ["\\ud800", "a\\u0000b"], ids=["surrogate", "nul"])
async def test_an_odd_callers_stream_is_served(agent: tuple[str, str], sub: str) -> None:
    base, address = agent
    token = signed(f'{{"sub": "{sub}", "exp": {int(time.time()) + 600}}}')
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    call = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30, verify=TLS) as http:
        for _ in range(2):  # the slot was given back: served again
            answer = await http.post("/", json={**call, "params": {"message": _message()}})
            assert answer.status_code == 200, answer.text  # was: 500
            assert "TASK_STATE_COMPLETED" in answer.text and '"error"' not in answer.text
            rest = await http.post("/message:stream", json={"message": _message()})
            assert rest.status_code == 200, rest.text  # was: 500
            assert "TASK_STATE_COMPLETED" in rest.text
    async with stubs(address) as (v1, _v03):
        metadata = (("authorization", f"Bearer {token}"),)
        stream = v1.SendStreamingMessage(message("demo.add", {"a": 1, "b": 2}), metadata=metadata)
        states = [event.status_update.status.state async for event in stream]
        assert states[-1] == TaskState.TASK_STATE_COMPLETED
