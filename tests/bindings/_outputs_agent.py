"""The agent of the module-output tests: modules that answer with files, choose between
a message and a task, stream text and files, and ask the caller for input."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from a2a.types import SendMessageRequest, TaskState
from apcore import Executor, ModuleAnnotations, Registry, module
from pydantic import BaseModel, ConfigDict

from apcore_a2a import (
    A2AApprovalHandler,
    A2AServerFactory,
    AuthRequired,
    File,
    InputRequired,
    reply_as,
)
from tests._sdk import request
from tests._support import free_port, threaded_server

#: a minimal PDF header and a PNG signature: enough for the media type sniffer
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
CHART_URL = "https://files.example.com/chart.svg"

BINDINGS = [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("GRPC", "1.0")]
ALL_TRANSPORTS = [*BINDINGS, ("JSONRPC", "0.3"), ("HTTP+JSON", "0.3"), ("GRPC", "0.3")]
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
AUTH_REQUIRED = TaskState.TASK_STATE_AUTH_REQUIRED
#: the credential out.repos accepts
TOKEN = "gho_valid"
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


class RepoIn(BaseModel):
    repo: str
    token: str | None = None


class RepoOut(BaseModel):
    repo: str
    stars: int
    follow_up: dict[str, Any] | None = None


class Repos:
    """Needs the caller's GitHub token: in the input, or in the message metadata."""

    input_schema = RepoIn
    output_schema = RepoOut
    description = "Count a repository's stars for the signed-in user"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        metadata = context.data.get("a2a.message_metadata") or {}
        token = metadata.get("githubToken") or inputs.get("token")
        if token != TOKEN:
            raise AuthRequired(
                "Sign in to GitHub" if token is None else "That token was refused; sign in again",
                scheme="oauth2",
                field="token",
                data={"authorizationUrl": "https://github.example/login/oauth/authorize"},
            )
        return {"repo": inputs["repo"], "stars": 7, "follow_up": context.data.get("a2a.follow_up")}


class WorkIn(BaseModel):
    seconds: float = 0


class WorkOut(BaseModel):
    done: str


class Worker:
    """Answers at once with a message, or turns long work into a task while it runs."""

    input_schema = WorkIn
    output_schema = WorkOut
    description = "Quick answers as messages, long work as a task"
    metadata = {"a2a": {"reply": "message"}}

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        if not inputs["seconds"]:
            return {"done": "quick"}
        reply_as(context, "task")
        deadline = time.monotonic() + inputs["seconds"]
        while time.monotonic() < deadline and not context.cancel_token.is_cancelled:
            time.sleep(0.02)
        return {"done": "long"}


def build_executor() -> Executor:
    registry = Registry()
    registry.register("out.files", Files())
    registry.register("out.reply", Replier())
    registry.register("out.auto", Chooser())
    registry.register("out.trip", Trip())
    registry.register("out.guarded_trip", GuardedTrip())
    registry.register("out.story", Story())
    registry.register("out.repos", Repos())
    registry.register("out.work", Worker())

    @module(id="out.dumped", description="A File from a plain function", registry=registry)
    def dumped() -> File:
        return File(raw=PDF, media_type="application/pdf", filename="dumped.pdf")

    return Executor(registry, approval_handler=A2AApprovalHandler())


@contextlib.contextmanager
def serve_outputs(**settings: Any) -> Iterator[str]:
    """Serve :func:`build_executor` over JSON-RPC, REST and gRPC; yields the base URL."""
    port, grpc_port = free_port(), free_port()
    app, _card = A2AServerFactory(
        build_executor(), environ={}, port=port, grpc_port=grpc_port, **settings
    ).create()
    with threaded_server(app, port=port) as url:
        yield url


async def send(client: Any, req: SendMessageRequest) -> Any:
    """The final Task or Message of a blocking send."""
    result: Any = None
    async for response in client.send_message(req):
        result = response.task if response.HasField("task") else response.message
    return result


def text_request(skill: str | None, text: str, task_id: str = "") -> SendMessageRequest:
    return request(skill, text=text, task_id=task_id)
