"""What a module answers, seen by the official SDK client on JSON-RPC, REST and gRPC.

* DM-ART-001: files with their media type and name, inline or by URL (``apcore_a2a.File``,
  and its dict shape from ``@module`` functions);
* DM-MSG-001: a module decides per call whether the answer is a ``Message`` or a ``Task``
  (``apcore_a2a.reply_as``);
* STREAM-SUB-002: a module asks the caller for input (``apcore_a2a.InputRequired``) and is
  called again with the answer merged into its input; approvals on the same task still
  resume the right input.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from a2a.types import GetTaskRequest, Message, Role, SendMessageRequest, TaskState
from apcore import Executor, ModuleAnnotations, Registry, module
from google.protobuf.json_format import MessageToDict
from pydantic import BaseModel, ConfigDict

from apcore_a2a import A2AApprovalHandler, A2AServerFactory, File, InputRequired, reply_as
from tests._sdk import make_client, request
from tests._support import free_port, threaded_server

#: a minimal PDF header and a PNG signature: enough for the media type sniffer
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
CHART_URL = "https://files.example.com/chart.svg"

BINDINGS = [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("GRPC", "1.0")]
ALL_TRANSPORTS = [*BINDINGS, ("JSONRPC", "0.3"), ("HTTP+JSON", "0.3"), ("GRPC", "0.3")]
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED


# -- modules -------------------------------------------------------------------------------
class Nothing(BaseModel):
    pass


class FilesOut(BaseModel):
    summary: str
    report: File
    chart: File
    blob: bytes


class Files:
    input_schema = Nothing
    output_schema = FilesOut
    description = "Return a named PDF, a chart by URL and unnamed bytes"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {
            "summary": "three files",
            "report": File(raw=PDF, media_type="application/pdf", filename="report.pdf"),
            "chart": File(url=CHART_URL, media_type="image/svg+xml", filename="chart.svg"),
            "blob": PNG,
        }


class Say(BaseModel):
    text: str
    answer: str = ""


class Said(BaseModel):
    said: str


class Replier:
    """Answers with a message unless the caller asks for a task (``answer``)."""

    input_schema = Say
    output_schema = Said
    description = "Say it back, as a message or as a task"
    metadata = {"a2a": {"reply": "message"}}

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        if inputs["text"] == "?":
            raise InputRequired("Say what?", field="text")
        if inputs.get("answer"):
            reply_as(context, inputs["answer"])
        return {"said": inputs["text"]}


class Chooser(Replier):
    """``reply: auto``: a task unless the module says message."""

    description = "Say it back; a task unless asked for a message"
    metadata = {"a2a": {"reply": "auto"}}


class TripIn(BaseModel):
    origin: str | None = None
    destination: str | None = None
    seats: int = 1


class TripOut(BaseModel):
    trip: str
    seats: int
    follow_up: dict[str, Any] | None = None


class Trip:
    """Asks for what is missing, one question at a time."""

    input_schema = TripIn
    output_schema = TripOut
    description = "Book a trip, asking for what is missing"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        if not inputs.get("destination"):
            raise InputRequired("Where to?", field="destination", data={"choices": ["JFK", "LHR"]})
        if not inputs.get("origin"):
            raise InputRequired("From where?", field="origin")
        return {
            "trip": f"{inputs['origin']} -> {inputs['destination']}",
            "seats": inputs.get("seats", 1),
            "follow_up": context.data.get("a2a.follow_up"),
        }


class GuardedTrip(Trip):
    description = "Book a trip after approval, asking for what is missing"
    annotations = ModuleAnnotations(requires_approval=True)


class StoryOut(BaseModel):
    model_config = ConfigDict(extra="allow")


class Story:
    """Streams text, a file and data: apcore streams dicts only, so text has a dict shape."""

    input_schema = Nothing
    output_schema = StoryOut
    description = "Tell a story, streaming"
    annotations = ModuleAnnotations(streaming=True)

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"kind": "text", "text": "Once upon a time."}

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        yield {"kind": "text", "text": "Once "}
        yield {"kind": "text", "text": "upon a time."}
        yield File(raw=PNG, media_type="image/png", filename="cover.png").model_dump()
        yield {"pages": 2}


def build_executor() -> Executor:
    registry = Registry()
    registry.register("out.files", Files())
    registry.register("out.reply", Replier())
    registry.register("out.auto", Chooser())
    registry.register("out.trip", Trip())
    registry.register("out.guarded_trip", GuardedTrip())
    registry.register("out.story", Story())

    @module(id="out.dumped", description="A File from a plain function", registry=registry)
    def dumped() -> File:
        return File(raw=PDF, media_type="application/pdf", filename="dumped.pdf")

    return Executor(registry, approval_handler=A2AApprovalHandler())


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    port, grpc_port = free_port(), free_port()
    app, _card = A2AServerFactory(
        build_executor(), environ={}, port=port, grpc_port=grpc_port
    ).create()
    with threaded_server(app, port=port) as url:
        yield url


# -- helpers -------------------------------------------------------------------------------
async def _send(client: Any, req: SendMessageRequest) -> Any:
    """The final Task or Message of a blocking send."""
    result: Any = None
    async for response in client.send_message(req):
        result = response.task if response.HasField("task") else response.message
    return result


def _text_request(skill: str | None, text: str, task_id: str = "") -> SendMessageRequest:
    return request(skill, text=text, task_id=task_id)


# -- DM-ART-001 ----------------------------------------------------------------------------
@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_files_keep_media_type_name_and_url(
    agent_url: str, binding: str, version: str
) -> None:
    client = await make_client(agent_url, binding, version)
    try:
        task = await _send(client, request("out.files", {}))
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
        task = await _send(client, request("out.dumped", {}))
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
        # The completed status sums the stream up: merged data, joined text, no file again.
        assert _kinds(final.message.parts) == [
            ("data", {"pages": 2}),
            ("text", "Once upon a time."),
        ]
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
        reply = await _send(client, request("out.reply", {"text": "hi"}))
        assert isinstance(reply, Message) and reply.role == Role.ROLE_AGENT
        assert [MessageToDict(p.data) for p in reply.parts] == [{"said": "hi"}]
        task = await _send(client, request("out.reply", {"text": "hi", "answer": "task"}))
        assert task.status.state == COMPLETED and task.id
        assert [MessageToDict(p.data) for p in task.artifacts[0].parts] == [{"said": "hi"}]
        stored = await client.get_task(GetTaskRequest(id=task.id))
        assert stored.status.state == COMPLETED
        assert MessageToDict(stored.metadata)["skillId"] == "out.reply"
        assert len(stored.history) >= 1 and stored.history[0].role == Role.ROLE_USER

        # reply "auto": a task by default, a message when the module says so
        task = await _send(client, request("out.auto", {"text": "yo"}))
        assert task.status.state == COMPLETED
        reply = await _send(client, request("out.auto", {"text": "yo", "answer": "message"}))
        assert isinstance(reply, Message)
        assert [MessageToDict(p.data) for p in reply.parts] == [{"said": "yo"}]
    finally:
        await client.close()


async def test_auto_skill_is_declared_on_the_card(agent_url: str) -> None:
    import httpx

    async with httpx.AsyncClient() as http:
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


# -- STREAM-SUB-002: asking for input --------------------------------------------------------
def _question(task: Any) -> tuple[str, dict[str, Any]]:
    text, data = task.status.message.parts
    return text.text, MessageToDict(data.data)


@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_module_asks_and_gets_the_answer(agent_url: str, binding: str, version: str) -> None:
    client = await make_client(agent_url, binding, version)
    try:
        first = await _send(client, request("out.trip", {"origin": "SFO", "seats": 2}))
        assert first.status.state == INPUT_REQUIRED
        text, data = _question(first)
        assert text == "Where to?"
        assert data == {
            "code": "INPUT_REQUIRED",
            "prompt": "Where to?",
            "field": "destination",
            "data": {"choices": ["JFK", "LHR"]},
        }
        # A plain text answer fills the field the module named; the rest of the input stays.
        done = await _send(client, _text_request(None, "JFK", task_id=first.id))
        assert done.status.state == COMPLETED, done.status
        assert done.context_id == first.context_id
        assert [MessageToDict(p.data) for p in done.artifacts[0].parts] == [
            {
                "trip": "SFO -> JFK",
                "seats": 2,
                "follow_up": {"prompt": "Where to?", "field": "destination"},
            }
        ]
        stored = await client.get_task(GetTaskRequest(id=first.id))
        roles = [m.role for m in stored.history]
        assert roles == [Role.ROLE_USER, Role.ROLE_AGENT, Role.ROLE_USER]
        assert stored.history[2].parts[0].text == "JFK"
    finally:
        await client.close()


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_two_questions_streamed(agent_url: str, binding: str, version: str) -> None:
    client = await make_client(agent_url, binding, version, streaming=True)
    try:
        events = [e async for e in client.send_message(request("out.trip", {}))]
        kinds = [e.WhichOneof("payload") for e in events]
        assert kinds == ["task", "status_update", "status_update"]
        assert events[-1].status_update.status.state == INPUT_REQUIRED
        task_id = events[0].task.id
        # A data answer is merged too; this one brings the destination only.
        second = [
            e
            async for e in client.send_message(
                _with_task(request(None, {"destination": "LHR"}), task_id)
            )
        ]
        last = second[-1].status_update.status
        assert last.state == INPUT_REQUIRED
        assert last.message.parts[0].text == "From where?"
        third = [e async for e in client.send_message(_text_request(None, "OSL", task_id))]
        assert third[-1].status_update.status.state == COMPLETED
        [artifact] = [e.artifact_update.artifact for e in third if e.HasField("artifact_update")]
        assert MessageToDict(artifact.parts[0].data)["trip"] == "OSL -> LHR"
    finally:
        await client.close()


def _with_task(req: SendMessageRequest, task_id: str) -> SendMessageRequest:
    req.message.task_id = task_id
    return req


async def test_an_answer_that_does_not_fit_asks_again(agent_url: str) -> None:
    client = await make_client(agent_url, "JSONRPC", "1.0")
    try:
        first = await _send(client, request("out.trip", {"origin": "SFO"}))
        # seats must be an integer: the module does not run; the question is asked again.
        again = await _send(client, request(None, {"seats": "many"}, task_id=first.id))
        assert again.status.state == INPUT_REQUIRED
        text, data = _question(again)
        assert text.endswith("Where to?") and "seats" in text
        assert data["field"] == "destination" and "seats" in data["error"]
        done = await _send(client, _text_request(None, "JFK", task_id=first.id))
        assert done.status.state == COMPLETED
        assert MessageToDict(done.artifacts[0].parts[0].data)["trip"] == "SFO -> JFK"
    finally:
        await client.close()


async def test_a_message_skill_that_asks_becomes_a_task(agent_url: str) -> None:
    client = await make_client(agent_url, "HTTP+JSON", "1.0")
    try:
        asked = await _send(client, request("out.reply", {"text": "?"}))
        assert asked.status.state == INPUT_REQUIRED and asked.id
        assert _question(asked)[0] == "Say what?"
        done = await _send(client, _text_request(None, "hello", task_id=asked.id))
        assert done.status.state == COMPLETED
        assert [MessageToDict(p.data) for p in done.artifacts[0].parts] == [{"said": "hello"}]
    finally:
        await client.close()


async def test_approval_after_an_answer_resumes_the_merged_input(agent_url: str) -> None:
    """Approval on every run: the run that took the answer resumes on the merged input."""
    client = await make_client(agent_url, "GRPC", "1.0")
    try:
        parked = await _send(client, request("out.guarded_trip", {"origin": "SFO"}))
        assert "approvalId" in _question(parked)[1]
        asked = await _send(client, request(None, {"approved": True}, task_id=parked.id))
        assert _question(asked)[0] == "Where to?"
        parked_again = await _send(client, _text_request(None, "JFK", task_id=parked.id))
        assert "approvalId" in _question(parked_again)[1]
        done = await _send(client, _text_request(None, "approve", task_id=parked.id))
        assert done.status.state == COMPLETED, done.status
        out = MessageToDict(done.artifacts[0].parts[0].data)
        assert out["trip"] == "SFO -> JFK"
    finally:
        await client.close()


async def test_a_question_is_answered_after_a_restart(tmp_path: Any) -> None:
    """The question lives in the task store: a new server on the same store takes the answer."""
    store = f"sqlite:///{tmp_path / 'tasks.db'}"

    def app_on(port: int) -> Any:
        app, _card = A2AServerFactory(
            build_executor(), environ={}, port=port, task_store=store
        ).create()
        return app

    port = free_port()
    with threaded_server(app_on(port), port=port) as url:
        client = await make_client(url, "JSONRPC", "1.0")
        try:
            asked = await _send(client, request("out.trip", {"destination": "LHR", "seats": 3}))
            assert _question(asked)[0] == "From where?"
        finally:
            await client.close()
    port = free_port()
    with threaded_server(app_on(port), port=port) as url:
        client = await make_client(url, "JSONRPC", "1.0")
        try:
            done = await _send(client, _text_request(None, "OSL", task_id=asked.id))
            assert done.status.state == COMPLETED, done.status
            out = MessageToDict(done.artifacts[0].parts[0].data)
            assert (out["trip"], out["seats"]) == ("OSL -> LHR", 3)
        finally:
            await client.close()
