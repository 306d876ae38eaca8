"""Streaming and non-streaming modules: exact event order over every transport."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.types import GetTaskRequest

from tests._sdk import request
from tests._support import TLS

from ._agent import Agent
from ._client import (
    TRANSPORTS,
    V03,
    collect,
    parts_data,
    rpc,
    sdk_client,
    sse_post,
    summarize,
    wire_message_03,
)


@pytest.mark.parametrize(("binding", "version"), TRANSPORTS)
async def test_streaming_module_chunks_then_completed(
    agent: Agent, binding: str, version: str
) -> None:
    client = await sdk_client(agent.url, binding, version)
    try:
        events = await collect(client.send_message(request("life.count", {"count": 3})))
        assert [summarize(e) for e in events] == [
            ("task", "SUBMITTED"),
            ("status", "WORKING"),
            ("artifact", False, False),
            ("artifact", True, False),
            ("artifact", True, False),
            ("artifact", True, True),
            ("status", "COMPLETED"),
        ]
        updates = [e.artifact_update for e in events if e.HasField("artifact_update")]
        assert len({u.artifact.artifact_id for u in updates}) == 1
        chunks = [parts_data(u.artifact.parts) for u in updates]
        assert chunks == [[{"n": 1}], [{"n": 2}], [{"n": 3}], [{"done": True}]]
        final = events[-1].status_update.status
        assert parts_data(final.message.parts) == [{"n": 3, "done": True}]

        stored = await client.get_task(GetTaskRequest(id=events[0].task.id))
        assert stored.status.state == events[-1].status_update.status.state
        assert [parts_data(a.parts) for a in stored.artifacts] == [
            [{"n": 1}, {"n": 2}, {"n": 3}, {"done": True}]
        ]
    finally:
        await client.close()


@pytest.mark.parametrize(("binding", "version"), TRANSPORTS)
async def test_plain_module_streams_status_and_one_artifact(
    agent: Agent, binding: str, version: str
) -> None:
    client = await sdk_client(agent.url, binding, version)
    try:
        events = await collect(client.send_message(request("life.echo", {"text": "hi"})))
        assert [summarize(e) for e in events] == [
            ("task", "SUBMITTED"),
            ("status", "WORKING"),
            ("artifact", False, True),
            ("status", "COMPLETED"),
        ]
        assert parts_data(events[2].artifact_update.artifact.parts) == [{"text": "hi"}]
        assert events[0].task.history[0].parts[0].data.struct_value["text"] == "hi"
    finally:
        await client.close()


@pytest.mark.parametrize(("binding", "version"), TRANSPORTS)
async def test_mid_stream_error_ends_with_sanitized_failed_status(
    agent: Agent, binding: str, version: str
) -> None:
    client = await sdk_client(agent.url, binding, version)
    try:
        events = await collect(
            client.send_message(request("life.count", {"count": 5, "fail_after": 2}))
        )
        assert [summarize(e) for e in events] == [
            ("task", "SUBMITTED"),
            ("status", "WORKING"),
            ("artifact", False, False),
            ("artifact", True, False),
            ("status", "FAILED"),
        ]
        status = events[-1].status_update.status
        text, data = parts_data(status.message.parts)
        assert text == "Module execution failed"
        assert data["code"] == "MODULE_EXECUTE_ERROR"
        rendered = repr(parts_data(status.message.parts))
        for secret in ("hunter2", "/srv/app", "config.py", "Traceback"):
            assert secret not in rendered
        stored = await client.get_task(GetTaskRequest(id=events[0].task.id))
        assert stored.status.state == status.state
    finally:
        await client.close()


async def test_v03_message_stream_wire(agent: Agent) -> None:
    """0.3 ``message/stream`` on the wire: kinds, lowercase states, one artifact id."""
    body = rpc("message/stream", {"message": wire_message_03("life.count", {"count": 2})})
    async with httpx.AsyncClient(verify=TLS) as http:
        response, events = await sse_post(http, agent.url + "/", body, V03)
    assert response.status_code == 200
    results: list[dict[str, Any]] = [e["result"] for e in events]
    kinds = [
        (r["kind"], r.get("status", {}).get("state"), r.get("append"), r.get("lastChunk"))
        for r in results
    ]
    assert kinds == [
        ("task", "submitted", None, None),
        ("status-update", "working", None, None),
        ("artifact-update", None, False, False),
        ("artifact-update", None, True, False),
        ("artifact-update", None, True, True),
        ("status-update", "completed", None, None),
    ]
    assert results[-1]["final"] is True
    ids = {r["artifact"]["artifactId"] for r in results if r["kind"] == "artifact-update"}
    assert len(ids) == 1


async def test_streaming_module_with_no_chunks_completes_without_artifact(agent: Agent) -> None:
    client = await sdk_client(agent.url)
    try:
        events = await collect(client.send_message(request("life.count", {"count": 0})))
        # count=0 still yields the {"done": true} chunk, the last one
        assert [summarize(e) for e in events] == [
            ("task", "SUBMITTED"),
            ("status", "WORKING"),
            ("artifact", False, True),
            ("status", "COMPLETED"),
        ]
    finally:
        await client.close()
