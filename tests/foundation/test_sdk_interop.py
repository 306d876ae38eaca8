"""The official a2a-sdk client drives our server over JSON-RPC and REST, 1.0 and 0.3."""

from __future__ import annotations

import pytest
from a2a.types import GetTaskRequest, ListTasksRequest, Part, TaskState
from google.protobuf.json_format import MessageToDict

from tests._sdk import data_part, make_client
from tests.foundation.sdk import BINDINGS, message, send


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_dict_module_roundtrip(agent_url: str, binding: str, version: str) -> None:
    client = await make_client(agent_url, binding, version)
    try:
        task = await send(client, message(data_part({"a": 2, "b": 40}), skill="math.add"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        artifact = MessageToDict(task.artifacts[0])
        assert artifact["parts"] == [{"data": {"sum": 42}}]
        fetched = await client.get_task(GetTaskRequest(id=task.id, history_length=10))
        assert fetched.id == task.id
        assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
        assert fetched.history[0].parts[0].data.struct_value["a"] == 2
        assert MessageToDict(fetched.metadata) == {"skillId": "math.add"}
    finally:
        await client.close()


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_text_module_roundtrip(agent_url: str, binding: str, version: str) -> None:
    client = await make_client(agent_url, binding, version)
    try:
        task = await send(client, message(Part(text="hello"), skill="text.shout"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert [p.text for p in task.artifacts[0].parts] == ["HELLO!"]
        # a plain text part reaches a module whose one required property is a string
        task = await send(client, message(Part(text="two words"), skill="text.stats"))
        assert MessageToDict(task.artifacts[0].parts[0])["data"] == {"words": 2, "characters": 9}
    finally:
        await client.close()


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_list_tasks_1_0(agent_url: str, binding: str) -> None:
    client = await make_client(agent_url, binding, "1.0")
    try:
        task = await send(client, message(data_part({"a": 1, "b": 1}), skill="math.add"))
        listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        assert [t.id for t in listed.tasks] == [task.id]
        assert listed.tasks[0].status.state == TaskState.TASK_STATE_COMPLETED
    finally:
        await client.close()


async def test_integer_fields_from_official_client(agent_url: str) -> None:
    """protobuf sends 2 as 2.0; the integer-typed module still gets ints and answers 42."""
    client = await make_client(agent_url, "JSONRPC", "1.0")
    try:
        task = await send(client, message(data_part({"a": 2, "b": 40}), skill="math.add"))
        value = task.artifacts[0].parts[0].data.struct_value["sum"]
        assert value == 42
    finally:
        await client.close()


async def test_no_skill_id_single_skill_agent(single_url: str) -> None:
    client = await make_client(single_url, "JSONRPC", "1.0")
    try:
        task = await send(client, message(data_part({"a": 20, "b": 22})))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].data.struct_value["sum"] == 42
    finally:
        await client.close()


async def test_no_skill_id_default_skill_agent(default_url: str) -> None:
    client = await make_client(default_url, "HTTP+JSON", "1.0")
    try:
        task = await send(client, message(Part(text="generic client")))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "GENERIC CLIENT!"
        assert MessageToDict(task.metadata) == {"skillId": "text.shout"}
    finally:
        await client.close()
