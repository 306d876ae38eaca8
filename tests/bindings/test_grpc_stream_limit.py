"""gRPC server streams count against the same stream limits as SSE streams.

One anonymous caller (one address) with ``max_streams_per_caller=2`` holds two gRPC
streams open: its third stream, over gRPC or over SSE, is refused (RESOURCE_EXHAUSTED /
HTTP 429), and once its streams end it is served again.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, a2a_pb2

from tests._support import TLS
from tests.bindings._agent import GATES, serve_agent
from tests.bindings._grpc import stubs


def _gate_request(key: str) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex)
    part = Part()
    part.data.struct_value.update({"key": key})
    message.parts.append(part)
    message.metadata.update({"skillId": "demo.gate"})
    return a2a_pb2.SendMessageRequest(message=message)


async def test_grpc_streams_take_slots_from_the_shared_per_caller_quota() -> None:
    keys = [f"grpc-limit-{uuid.uuid4().hex}" for _ in range(2)]
    with serve_agent(max_streams_per_caller=2) as agent:
        async with stubs(agent.grpc_address) as (v1, _v03):
            held = [v1.SendStreamingMessage(_gate_request(key)) for key in keys]
            readers = [asyncio.ensure_future(_drain(call)) for call in held]
            try:
                for key in keys:
                    await GATES.wait_started(key)
                # Its gate is open: were it served, it would end and pytest.raises would fail.
                open_key = f"open-{uuid.uuid4().hex}"
                GATES.release(open_key)
                third = v1.SendStreamingMessage(_gate_request(open_key))
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    async for _ in third:
                        pass
                assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "at most 2 concurrent streams" in (refused.value.details() or "")
                async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:
                    body = {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "SendStreamingMessage",
                        "params": {
                            "message": {
                                "messageId": uuid.uuid4().hex,
                                "role": "ROLE_USER",
                                "parts": [{"data": {"key": "sse"}}],
                                "metadata": {"skillId": "demo.gate"},
                            }
                        },
                    }
                    sse = await http.post("/", json=body, headers={"A2A-Version": "1.0"})
                    assert sse.status_code == 429, sse.text
            finally:
                for key in keys:
                    GATES.release(key)
                results = await asyncio.gather(*readers)
            assert all(results), "a held stream did not complete"
            # The slots are back: a new stream is served to the end.
            again = f"grpc-limit-{uuid.uuid4().hex}"
            GATES.release(again)
            assert await _drain(v1.SendStreamingMessage(_gate_request(again)))


async def _drain(call: Any) -> bool:
    """Read a stream to its end; whether it ended with a completed status."""
    last = None
    async for response in call:
        last = response
    return last is not None and last.status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_health_watch_streams_take_stream_slots_and_give_them_back() -> None:
    # grpc.health.v1 needs no credentials: without a slot per Watch, one client could
    # hold any number of streams open (20,000 cost the agent 400 MB).
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    watch = health_pb2.HealthCheckRequest(service="")
    with serve_agent(max_streams_per_caller=2) as agent:
        async with grpc.aio.insecure_channel(agent.grpc_address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            held = [health.Watch(watch) for _ in range(2)]
            for call in held:
                assert (await call.read()).status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await health.Watch(watch).read()
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "at most 2 concurrent streams" in (refused.value.details() or "")
            async with stubs(agent.grpc_address) as (v1, _v03):
                open_key = f"open-{uuid.uuid4().hex}"
                GATES.release(open_key)
                with pytest.raises(grpc.aio.AioRpcError) as a2a_refused:
                    await _drain(v1.SendStreamingMessage(_gate_request(open_key)))
                assert a2a_refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                # A Watch the client cancels gives its slot back.
                held[0].cancel()
                again = f"again-{uuid.uuid4().hex}"
                GATES.release(again)
                codes, served = [], False
                for _ in range(200):  # a hang guard: the release is asynchronous
                    try:
                        served = await _drain(v1.SendStreamingMessage(_gate_request(again)))
                    except grpc.aio.AioRpcError as exc:
                        codes.append(exc.code())
                        await asyncio.sleep(0.05)
                    else:
                        break
                assert served, "a canceled Watch kept its stream slot"
                assert set(codes) <= {grpc.StatusCode.RESOURCE_EXHAUSTED}
            held[1].cancel()
