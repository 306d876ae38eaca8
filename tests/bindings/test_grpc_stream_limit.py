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
                async with httpx.AsyncClient(base_url=agent.url, timeout=30) as http:
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
