"""A module output nested deeper than protobuf (upb) parses is the module's failure: its
task ends ``failed`` with a message naming the limit, on every binding and version, in a
blocking send and mid-stream, and the store still reads that task and the others. Before,
the send answered -32603 and the task was left failed without a reason."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from a2a.types import GetTaskRequest, ListTasksRequest, Message, TaskState
from apcore import Executor, ModuleAnnotations, Registry
from google.protobuf.json_format import MessageToDict
from pydantic import BaseModel, ConfigDict

from apcore_a2a import A2AServerFactory, InputRequired
from tests._postgres import store_url
from tests._sdk import make_client, request
from tests._support import free_port, threaded_server

from ._outputs_agent import ALL_TRANSPORTS, COMPLETED, send

FAILED = TaskState.TASK_STATE_FAILED
LIMIT = "at most 30 nested objects or 45 nested lists"


def nested(objects: int = 0, lists: int = 0) -> Any:
    value: Any = "leaf"
    for _ in range(lists):
        value = [value]
    for _ in range(objects):
        value = {"a": value}
    return value


class Depth(BaseModel):
    objects: int = 0
    lists: int = 0


class Any_(BaseModel):
    model_config = ConfigDict(extra="allow")


class Deep:
    input_schema = Depth
    output_schema = Any_
    description = "Answer with an output nested as deep as asked"

    def execute(self, inputs: dict[str, Any], context: Any) -> Any:
        return {"deep": nested(inputs["objects"] - 1, inputs.get("lists", 0))}


class DeepQuestion(Deep):
    """Asks the caller, with data nested as deep as asked (under the question's "data")."""

    def execute(self, inputs: dict[str, Any], context: Any) -> Any:
        raise InputRequired("Which one?", data=nested(inputs["objects"] - 1))


class DeepReply(Deep):
    metadata = {"a2a": {"reply": "message"}}


class DeepStream(Deep):
    annotations = ModuleAnnotations(streaming=True)

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[Any]:
        yield {"first": "chunk"}
        yield self.execute(inputs, context)


@pytest.fixture(scope="module", params=["memory", "sqlite", "postgresql"])
def deep_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    registry = Registry()
    registry.register("deep.task", Deep())
    registry.register("deep.reply", DeepReply())
    registry.register("deep.stream", DeepStream())
    registry.register("deep.ask", DeepQuestion())
    with contextlib.ExitStack() as stack:
        store = "memory://"
        if request.param != "memory":
            folder = tmp_path_factory.mktemp("deep")
            store = stack.enter_context(store_url(request.param, folder))
        port, grpc_port = free_port(), free_port()
        app, _card = A2AServerFactory(
            Executor(registry), environ={}, port=port, grpc_port=grpc_port, task_store=store
        ).create()
        yield stack.enter_context(threaded_server(app, port=port))


def _reason(task: Any) -> str:
    return " ".join(p.text for p in task.status.message.parts if p.text)


async def _still_readable(client: Any, version: str, *task_ids: str) -> None:
    for task_id in task_ids:
        assert (await client.get_task(GetTaskRequest(id=task_id))).id == task_id
    if version == "1.0":  # 0.3 has no ListTasks
        listed = await client.list_tasks(ListTasksRequest(page_size=100))
        assert set(task_ids) <= {t.id for t in listed.tasks}


@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_too_deep_output_fails_its_task(deep_url: str, binding: str, version: str) -> None:
    client = await make_client(deep_url, binding, version)
    try:
        fine = await send(client, request("deep.task", {"objects": 30}))
        assert fine.status.state == COMPLETED, fine.status
        lists = await send(client, request("deep.task", {"objects": 1, "lists": 44}))
        assert lists.status.state == COMPLETED, lists.status
        [part] = fine.artifacts[0].parts
        assert str(MessageToDict(part.data)).count("{") == 30

        for depth in (
            {"objects": 35},
            {"objects": 31},
            {"objects": 1, "lists": 45},
            {"objects": 200},
        ):
            failed = await send(client, request("deep.task", depth))
            assert failed.status.state == FAILED, failed.status
            assert LIMIT in _reason(failed)
            assert not failed.artifacts
            await _still_readable(client, version, failed.id, fine.id, lists.id)

        # Answered as any module failure of a message reply: on 0.3's JSON bindings that
        # answer carries no message yet (the same for a module's own ModuleError).
        with pytest.raises(Exception, match=LIMIT if version == "1.0" else None):
            await send(client, request("deep.reply", {"objects": 31}))
        reply = await send(client, request("deep.reply", {"objects": 30}))
        assert isinstance(reply, Message) and reply.parts
    finally:
        await client.close()


@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_too_deep_chunk_fails_the_stream(deep_url: str, binding: str, version: str) -> None:
    client = await make_client(deep_url, binding, version, streaming=True)
    try:
        events = [e async for e in client.send_message(request("deep.stream", {"objects": 31}))]
        chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
        assert [MessageToDict(c.artifact.parts[0].data) for c in chunks] == [{"first": "chunk"}]
        final = events[-1].status_update.status
        assert final.state == FAILED and LIMIT in _reason(events[-1].status_update)
        task_id = events[0].task.id if events[0].HasField("task") else chunks[0].task_id
        stored = await client.get_task(GetTaskRequest(id=task_id))
        assert stored.status.state == FAILED and LIMIT in _reason(stored)
        assert [MessageToDict(p.data) for p in stored.artifacts[0].parts] == [{"first": "chunk"}]

        events = [e async for e in client.send_message(request("deep.stream", {"objects": 30}))]
        assert events[-1].status_update.status.state == COMPLETED
        await _still_readable(client, version, task_id, events[-1].status_update.task_id)
    finally:
        await client.close()


@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_too_deep_question_data_fails_its_task(
    deep_url: str, binding: str, version: str
) -> None:
    client = await make_client(deep_url, binding, version)
    try:
        asked = await send(client, request("deep.ask", {"objects": 30}))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, asked.status
        failed = await send(client, request("deep.ask", {"objects": 31}))
        assert failed.status.state == FAILED and LIMIT in _reason(failed), failed.status
        await _still_readable(client, version, asked.id, failed.id)
    finally:
        await client.close()
