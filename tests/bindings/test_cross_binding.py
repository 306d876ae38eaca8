"""One task store behind every binding: what one binding creates, the others see and steer."""

from __future__ import annotations

import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from tests._support import TLS
from tests.bindings._agent import GATES, Agent
from tests.bindings._grpc import stubs
from tests.bindings._peers import data, fetch_card, message, open_peer, send, text

PAIRS = [
    (("GRPC", "1.0"), ("JSONRPC", "1.0")),
    (("JSONRPC", "1.0"), ("GRPC", "1.0")),
    (("GRPC", "0.3"), ("JSONRPC", "1.0")),
    (("JSONRPC", "0.3"), ("GRPC", "1.0")),
    (("HTTP+JSON", "1.0"), ("GRPC", "0.3")),
    (("GRPC", "1.0"), ("HTTP+JSON", "1.0")),
]


def _ids(pair: tuple[tuple[str, str], tuple[str, str]]) -> str:
    (b1, v1), (b2, v2) = pair
    return f"{b1}-{v1}->{b2}-{v2}"


@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
async def test_task_created_on_one_binding_is_the_same_task_on_another(
    agent: Agent, pair: tuple[tuple[str, str], tuple[str, str]]
) -> None:
    (creator_binding, creator_version), (reader_binding, reader_version) = pair
    card = await fetch_card(agent.url)
    async with (
        open_peer(card, creator_binding, creator_version) as creator,
        open_peer(card, reader_binding, reader_version) as reader,
    ):
        created = await send(creator, message(text(f"via {creator.name}"), skill="demo.echo"))
        assert created.status.state == TaskState.TASK_STATE_COMPLETED

        request = GetTaskRequest(id=created.id, history_length=10)
        seen_by_reader = await reader.client.get_task(request)
        seen_by_creator = await creator.client.get_task(request)
        # Same stored task: ids and timestamps included, everything matches.
        assert MessageToDict(seen_by_reader) == MessageToDict(seen_by_creator)
        assert seen_by_reader.artifacts[0].parts[0].data.struct_value["text"] == (
            f"echo: via {creator.name}"
        )
        if reader_version == "1.0":
            listed = await reader.client.list_tasks(ListTasksRequest(context_id=created.context_id))
            assert [t.id for t in listed.tasks] == [created.id]


async def test_task_started_over_jsonrpc_is_followed_and_canceled_over_grpc(agent: Agent) -> None:
    card = await fetch_card(agent.url)
    async with (
        open_peer(card, "JSONRPC", "1.0") as rpc,
        open_peer(card, "GRPC", "1.0") as grpc_peer,
        open_peer(card, "GRPC", "0.3") as grpc_old,
    ):
        key = "cross-" + card.name
        started = await send(
            rpc, message(data({"key": key}), skill="demo.gate", return_immediately=True)
        )
        try:
            await GATES.wait_started(key)
            stream = grpc_peer.streaming.subscribe(SubscribeToTaskRequest(id=started.id))
            first = await anext(aiter(stream))
            assert first.task.id == started.id
            assert first.task.status.state == TaskState.TASK_STATE_WORKING

            canceled = await grpc_old.client.cancel_task(CancelTaskRequest(id=started.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            await stream.aclose()
        finally:
            GATES.release(key)
        seen = await rpc.client.get_task(GetTaskRequest(id=started.id))
        assert seen.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_0_3_get_task_history_length_0_answers_the_whole_history(agent: Agent) -> None:
    # 0.3 reads 0 as unset (gRPC's int32 cannot tell them apart; the genuine 0.3 server
    # reads JSON's 0 so too): the whole history. 1.0's 0 is none (docs/interop.md).
    card = await fetch_card(agent.url)
    async with open_peer(card, "JSONRPC", "1.0") as rpc:
        created = await send(rpc, message(text("history"), skill="demo.echo"))
    ids = [m.message_id for m in created.history]
    async with (
        stubs(agent.grpc_address) as (v1, v03),
        httpx.AsyncClient(base_url=agent.url, verify=TLS) as http,
    ):
        new = await v1.GetTask(GetTaskRequest(id=created.id, history_length=0))
        old = await v03.GetTask(pb03.GetTaskRequest(name=f"tasks/{created.id}", history_length=0))
        params = {"id": created.id, "historyLength": 0}
        rpc03 = await http.post(
            "/", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": params}
        )
        rest03 = await http.get(f"/v1/tasks/{created.id}?historyLength=0")
    assert len(new.history) == 0
    assert [m.message_id for m in old.history] == ids != []
    assert [m["messageId"] for m in rpc03.json()["result"]["history"]] == ids
    assert [m["messageId"] for m in rest03.json()["history"]] == ids
