"""What a module answers, seen by the official SDK client on JSON-RPC, REST and gRPC.

* DM-ART-001: files with their media type and name, inline or by URL (``apcore_a2a.File``,
  and its dict shape from ``@module`` functions); streaming modules emit text and file
  chunks;
* DM-MSG-001: a module decides per call whether the answer is a ``Message`` or a ``Task``
  (``apcore_a2a.reply_as``).

The modules are in ``_outputs_agent.py``; asking for input is ``test_module_questions.py``.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from a2a.types import GetTaskRequest, Message, Role
from google.protobuf.json_format import MessageToDict

from apcore_a2a import File, InputRequired, reply_as
from tests._sdk import make_client, request
from tests._support import TLS

from ._outputs_agent import (
    ALL_TRANSPORTS,
    BINDINGS,
    CHART_URL,
    COMPLETED,
    PDF,
    PNG,
    send,
)


# -- DM-ART-001 ----------------------------------------------------------------------------
@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_files_keep_media_type_name_and_url(
    agent_url: str, binding: str, version: str
) -> None:
    client = await make_client(agent_url, binding, version)
    try:
        task = await send(client, request("out.files", {}))
        assert task.status.state == COMPLETED, task.status
        [artifact] = task.artifacts
        data, report, chart, blob = artifact.parts
        assert MessageToDict(data.data) == {"summary": "three files"}
        assert (report.raw, report.media_type, report.filename) == (
            PDF,
            "application/pdf",
            "report.pdf",
        )
        assert report.WhichOneof("content") == "raw"
        assert chart.WhichOneof("content") == "url"
        assert (chart.url, chart.media_type, chart.filename) == (
            CHART_URL,
            "image/svg+xml",
            "chart.svg",
        )
        # Plain bytes keep working: sniffed media type, the key as the file name.
        assert (blob.raw, blob.media_type, blob.filename) == (PNG, "image/png", "blob")
    finally:
        await client.close()


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_file_from_a_function_module(agent_url: str, binding: str, version: str) -> None:
    """``@module`` dumps the File to a dict; that dict shape is a file too."""
    client = await make_client(agent_url, binding, version)
    try:
        task = await send(client, request("out.dumped", {}))
        [part] = task.artifacts[0].parts
        assert (part.raw, part.media_type, part.filename) == (PDF, "application/pdf", "dumped.pdf")
    finally:
        await client.close()


def test_file_needs_exactly_one_source() -> None:
    with pytest.raises(ValueError, match="exactly one of raw"):
        File(media_type="application/pdf")
    with pytest.raises(ValueError, match="exactly one of raw"):
        File(raw=b"x", url="https://files.example.com/x")
    with pytest.raises(ValueError, match="must not be empty"):
        File(url="  ")
    with pytest.raises(ValueError, match="kind must be"):
        reply_as(object(), "later")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty prompt"):
        InputRequired("  ")


def test_file_shaped_dicts_and_plain_data() -> None:
    from apcore_a2a.adapters.parts import output_to_parts

    dumped = File(raw=PDF, filename="a.pdf").model_dump(mode="json")
    assert dumped["raw"] == base64.urlsafe_b64encode(PDF).decode()
    [part] = output_to_parts(dumped)
    assert (part.raw, part.media_type, part.filename) == (PDF, "application/pdf", "a.pdf")
    # Data that only looks a bit like a file stays data.
    for value in (
        {"kind": "file", "url": CHART_URL, "owner": "ann"},
        {"url": CHART_URL, "media_type": "image/png"},
        {"kind": "file", "raw": "not base64!"},
    ):
        [part] = output_to_parts(value)
        assert part.WhichOneof("content") == "data", value
    [text] = output_to_parts({"kind": "text", "text": "hi"})
    assert text.text == "hi"
    [data] = output_to_parts({"kind": "text", "text": "hi", "lang": "en"})
    assert data.WhichOneof("content") == "data"
    files = output_to_parts([File(url=CHART_URL), File(raw=b"abc")])
    assert [p.WhichOneof("content") for p in files] == ["url", "raw"]
    assert files[0].media_type == ""  # a URL without a media type gets none


def _kinds(parts: Any) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for part in parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            out.append(("text", part.text))
        elif kind == "data":
            out.append(("data", MessageToDict(part.data)))
        else:
            out.append((kind, (part.media_type, part.filename, len(part.raw))))
    return out


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_stream_of_text_file_and_data_chunks(
    agent_url: str, binding: str, version: str
) -> None:
    client = await make_client(agent_url, binding, version, streaming=True)
    try:
        events = [e async for e in client.send_message(request("out.story", {}))]
        chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
        assert [_kinds(c.artifact.parts) for c in chunks] == [
            [("text", "Once ")],
            [("text", "upon a time.")],
            [("raw", ("image/png", "cover.png", len(PNG)))],
            [("data", {"pages": 2})],
        ]
        assert [c.append for c in chunks] == [False, True, True, True]
        final = events[-1].status_update.status
        assert final.state == COMPLETED
        # The completed status sums the stream up with the merged data only: the text and
        # the file are in the artifact, stored and sent once.
        assert _kinds(final.message.parts) == [("data", {"pages": 2})]
        stored = await client.get_task(GetTaskRequest(id=events[0].task.id))
        [artifact] = stored.artifacts
        assert [k for k, _ in _kinds(artifact.parts)] == ["text", "text", "raw", "data"]
        assert artifact.parts[2].raw == PNG
    finally:
        await client.close()


# -- DM-MSG-001 ----------------------------------------------------------------------------
@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_module_chooses_message_or_task_per_call(
    agent_url: str, binding: str, version: str
) -> None:
    client = await make_client(agent_url, binding, version)
    try:
        # reply "message": a message by default, a task when the module says so
        reply = await send(client, request("out.reply", {"text": "hi"}))
        assert isinstance(reply, Message) and reply.role == Role.ROLE_AGENT
        assert [MessageToDict(p.data) for p in reply.parts] == [{"said": "hi"}]
        task = await send(client, request("out.reply", {"text": "hi", "answer": "task"}))
        assert task.status.state == COMPLETED and task.id
        assert [MessageToDict(p.data) for p in task.artifacts[0].parts] == [{"said": "hi"}]
        stored = await client.get_task(GetTaskRequest(id=task.id))
        assert stored.status.state == COMPLETED
        assert MessageToDict(stored.metadata)["skillId"] == "out.reply"
        assert len(stored.history) >= 1 and stored.history[0].role == Role.ROLE_USER

        # reply "auto": a task by default, a message when the module says so
        task = await send(client, request("out.auto", {"text": "yo"}))
        assert task.status.state == COMPLETED
        reply = await send(client, request("out.auto", {"text": "yo", "answer": "message"}))
        assert isinstance(reply, Message)
        assert [MessageToDict(p.data) for p in reply.parts] == [{"said": "yo"}]
    finally:
        await client.close()


async def test_auto_skill_is_declared_on_the_card(agent_url: str) -> None:
    async with httpx.AsyncClient(verify=TLS) as http:
        card = (await http.get(agent_url + "/.well-known/agent-card.json")).json()
    [ext] = [
        e
        for e in card["capabilities"]["extensions"]
        if e["uri"] == "urn:apcore:a2a:skill-schemas:v1"
    ]
    skills = ext["params"]["skills"]
    assert skills["out.auto"]["reply"] == "auto"
    assert skills["out.reply"]["reply"] == "message"
    assert "reply" not in skills["out.trip"]
