"""At most ``max_streams`` (default 50) concurrent SSE streams, and at most
``max_streams_per_caller`` (default 20) for one caller: the next gets 503 or 429."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import pytest

from tests._support import TLS

from ._agent import Agent, agent_server
from ._client import V1, rpc, sse_events, wire_message


def _stream_body() -> dict[str, Any]:
    return rpc("SendStreamingMessage", {"message": wire_message("life.gate", {})})


async def test_51st_stream_gets_503_with_retry_after_and_creates_no_task(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with agent_server(caplog, max_streams_per_caller=0) as agent:
        await _fill_the_agent(agent)


async def _fill_the_agent(agent: Agent) -> None:
    assert agent.state.settings.max_streams == 50
    limits = httpx.Limits(max_connections=60, max_keepalive_connections=60)
    async with httpx.AsyncClient(base_url=agent.url, limits=limits, timeout=30, verify=TLS) as http:
        first_events: list[asyncio.Event] = [asyncio.Event() for _ in range(50)]
        finals: list[str] = []

        async def hold(index: int) -> None:
            async with http.stream("POST", "/", json=_stream_body(), headers=V1) as response:
                assert response.status_code == 200
                async for event in sse_events(response):
                    first_events[index].set()
                    finals.append(str(event["result"]))

        holders = [asyncio.create_task(hold(i)) for i in range(50)]
        try:
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in first_events)), 20)
            assert agent.state.streams.active == 50

            rejected = await http.post("/", json=_stream_body(), headers=V1)
            assert rejected.status_code == 503
            assert rejected.headers["retry-after"] == "5"
            assert rejected.json()["error"]["code"] == -32603
            rest = await http.post(
                "/message:stream", json={"message": wire_message("life.gate", {})}, headers=V1
            )
            assert rest.status_code == 503
            assert rest.headers["retry-after"] == "5"
            assert rest.json()["error"]["status"] == "UNAVAILABLE"

            # A non-streaming call is not a stream and still goes through.
            listed = await http.post("/", json=rpc("ListTasks", {"pageSize": 100}), headers=V1)
            assert listed.json()["result"]["totalSize"] == 50
        finally:
            assert agent.probe.gate is not None
            agent.probe.gate.set()
            results = await asyncio.gather(*holders, return_exceptions=True)
        assert all(r is None for r in results), results
        assert sum("TASK_STATE_COMPLETED" in f for f in finals) == 50
        assert agent.state.streams.active == 0
        assert agent.state.streams.rejected == 2

        # Slots are released: a new stream is accepted again.
        async with http.stream("POST", "/", json=_stream_body(), headers=V1) as response:
            assert response.status_code == 200
            with contextlib.suppress(StopAsyncIteration):
                await sse_events(response).__anext__()


async def test_one_caller_holds_at_most_its_quota_while_another_is_still_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    keys = {"X-API-Key": "key-a"}, {"X-API-Key": "key-b"}
    async with agent_server(caplog, max_streams_per_caller=3, api_keys=("key-a", "key-b")) as agent:
        limits = httpx.Limits(max_connections=10)
        async with httpx.AsyncClient(
            base_url=agent.url, limits=limits, timeout=30, verify=TLS
        ) as http:
            opened: list[asyncio.Event] = [asyncio.Event() for _ in range(3)]

            async def hold(index: int) -> None:
                async with http.stream(
                    "POST", "/", json=_stream_body(), headers={**V1, **keys[0]}
                ) as response:
                    assert response.status_code == 200
                    async for _event in sse_events(response):
                        opened[index].set()

            holders = [asyncio.create_task(hold(i)) for i in range(3)]
            try:
                await asyncio.wait_for(asyncio.gather(*(e.wait() for e in opened)), 20)
                over = await http.post("/", json=_stream_body(), headers={**V1, **keys[0]})
                assert over.status_code == 429
                assert over.headers["retry-after"] == "1"
                error = over.json()["error"]
                assert error["code"] == -32091
                assert "at most 3 concurrent streams per caller" in error["message"]
                rest = await http.post(
                    "/message:stream",
                    json={"message": wire_message("life.gate", {})},
                    headers={**V1, **keys[0]},
                )
                assert (rest.status_code, rest.json()["error"]["status"]) == (
                    429,
                    "RESOURCE_EXHAUSTED",
                )
                # Another caller is still served while the first one is at its quota.
                async with http.stream(
                    "POST", "/", json=_stream_body(), headers={**V1, **keys[1]}
                ) as other:
                    assert other.status_code == 200
                    assert agent.state.streams.active == 4
            finally:
                assert agent.probe.gate is not None
                agent.probe.gate.set()
                await asyncio.gather(*holders, return_exceptions=True)
            assert agent.state.streams.active == 0


async def test_a_stream_that_ended_frees_its_slot_before_the_caller_sees_the_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A caller with as many workers as its quota, each starting its next stream the
    # moment the previous one ended on its side: never more than the quota at once.
    async with agent_server(caplog, max_streams_per_caller=8) as agent:
        body = rpc("SendStreamingMessage", {"message": wire_message("life.echo", {"text": "x"})})
        limits = httpx.Limits(max_connections=8, max_keepalive_connections=8)
        async with httpx.AsyncClient(
            base_url=agent.url, limits=limits, timeout=30, verify=TLS
        ) as http:
            statuses: list[int] = []

            async def worker() -> None:
                for _ in range(12):
                    async with http.stream("POST", "/", json=body, headers=V1) as response:
                        statuses.append(response.status_code)
                        async for _event in sse_events(response):
                            pass

            await asyncio.gather(*(worker() for _ in range(8)))
        assert statuses == [200] * 96
        assert agent.state.streams.active == 0
