"""An answer past gRPC's own 4 MiB receive limit reads over gRPC as over HTTP, and one
past the client's limit (``MAX_ANSWER_BYTES``, 64 MiB) is the same typed error on every
binding, naming the limit: our server, with a module whose output is that large, and
A2AClient on a card narrowed to one binding (``test_bindings.Narrowed``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from apcore import Registry
from pydantic import BaseModel, Field

from apcore_a2a.client import A2AClient, InvalidAgentResponseError, InvalidRequestError
from apcore_a2a.client._bounded import MAX_ANSWER_BYTES
from benchmarks.client_read import peak
from tests._support import free_port, running_server

from .test_bindings import Narrowed

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: gRPC's default receive limit, which the client's channel raised to MAX_ANSWER_BYTES
GRPC_DEFAULT = 4 * 1024 * 1024


class PadIn(BaseModel):
    size: int = Field(ge=0, le=2 * MAX_ANSWER_BYTES)


class PadOut(BaseModel):
    text: str


class Pad:
    input_schema = PadIn
    output_schema = PadOut
    description = "Answer a text of the size asked"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"text": "x" * inputs["size"]}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agent() -> AsyncIterator[tuple[str, Narrowed]]:
    from apcore_a2a import A2AServerFactory

    registry = Registry()
    registry.register("big.pad", Pad())
    port = free_port()
    app, _card = A2AServerFactory(registry, port=port, grpc_port=free_port()).create()
    narrowed = Narrowed(app)
    async with running_server(narrowed, port=port) as url:
        yield url, narrowed


CASES = [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("GRPC", "1.0"), ("GRPC", "0.3")]


@pytest.mark.parametrize(("binding", "version"), CASES)
async def test_an_answer_past_grpcs_default_limit_reads_on_every_binding(
    agent: tuple[str, Narrowed], binding: str, version: str
) -> None:
    url, narrowed = agent
    narrowed.binding, narrowed.version = binding, version
    narrowed.seen.clear()
    size = GRPC_DEFAULT + 1024
    async with A2AClient(url, timeout=60) as client:
        task = await client.send_message({"size": size}, skill_id="big.pad")
        assert len(task["artifacts"][0]["parts"][0]["data"]["text"]) == size
        again = await client.get_task(task["id"])
        assert len(again["artifacts"][0]["parts"][0]["data"]["text"]) == size
        events = [e async for e in client.stream_message({"size": size}, skill_id="big.pad")]
        texts = [p["data"]["text"] for e in events for a in e.get("artifacts", [e.get("artifact")]) if a for p in a["parts"]]  # fmt: skip
        assert [len(t) for t in texts][-1:] == [size], [len(t) for t in texts]
    over_http = [s for s in narrowed.seen if not s[1].startswith("/.well-known/")]
    assert (over_http == []) is (binding == "GRPC"), over_http


@pytest.mark.parametrize(("binding", "version"), [("JSONRPC", "1.0"), ("GRPC", "1.0")])
async def test_an_answer_past_the_clients_limit_is_a_typed_error_naming_it(
    agent: tuple[str, Narrowed], binding: str, version: str
) -> None:
    url, narrowed = agent
    narrowed.binding, narrowed.version = binding, version
    async with A2AClient(url, timeout=120) as client:
        with pytest.raises(InvalidAgentResponseError, match=f"larger than {MAX_ANSWER_BYTES}"):
            await client.send_message({"size": MAX_ANSWER_BYTES}, skill_id="big.pad")


@pytest.mark.parametrize(("binding", "version"), CASES)
async def test_a_request_past_the_agents_body_limit_is_the_same_error_on_every_binding(
    agent: tuple[str, Narrowed], binding: str, version: str
) -> None:
    # The agent takes max_body_bytes (1 MiB) on every binding: its gRPC server's receive
    # limit. Over HTTP that is -32600 "Payload too large" (413); over gRPC the client said
    # A2AServerError (-32603, the agent's fault) quoting grpc's words.
    url, narrowed = agent
    narrowed.binding, narrowed.version = binding, version
    async with A2AClient(url, timeout=60) as client:
        with pytest.raises(InvalidRequestError, match=r"^Payload too large") as refused:
            await client.send_message({"size": 1, "pad": "y" * 1024 * 1024}, skill_id="big.pad")
    assert refused.value.code == -32600
    if binding == "GRPC":
        assert "at most 1048576 bytes" in str(refused.value), refused.value


async def test_a_large_answer_is_held_once_while_it_is_read() -> None:
    # Read to its end, an answer of many MiB is in memory once (plus the growth margin of
    # the buffer it is read into), not once more as a copy: tracemalloc's peak, with a wide
    # margin (a copy is 2x). The benchmark's reading (benchmarks/client_read.py) checks the
    # whole answer came.
    size = 32 * 1024 * 1024
    most = await peak(size)
    assert most < 1.5 * size, f"peak {most / size:.2f}x the answer"
