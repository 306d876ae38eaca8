"""What a gRPC error's message says, on the 1.0 and the 0.3 service.

A2A (§10.6) puts the error in ``google.rpc.Status``: the code, a message a person reads,
an ``ErrorInfo`` whose reason names the error. a2a-sdk's 0.3 service starts the message
with the A2A error type (``TaskNotFoundError: Task not found``), which the SDK's 0.3 gRPC
client reads back into its typed error: that stays. Our own errors are no A2A types; on
0.3 their message said their Python class (``QuotaExceededError: No ...``), which no 0.3
client knows. Now it is the message alone, as on 1.0, and the reason says which error.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Struct

from apcore_a2a.errors import OWN_ERRORS
from tests._support import TLS
from tests.bindings._agent import GATES, Agent, serve_agent
from tests.bindings._grpc import failure, rich_status, stubs

V1 = {"A2A-Version": "1.0"}
#: the class names of our own errors, none of which may reach a 0.3 message
OWN_NAMES = sorted(cls.__name__ for cls in OWN_ERRORS.values())


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    with serve_agent(max_unfinished_tasks_per_caller=1) as running:
        yield running


def _send_03(skill: str, task_id: str = "") -> pb03.SendMessageRequest:
    metadata = Struct()
    metadata.update({"skillId": skill})
    part = pb03.Part(text="hi")
    message = pb03.Message(
        message_id=uuid.uuid4().hex, role=pb03.ROLE_USER, content=[part], task_id=task_id
    )
    message.metadata.CopyFrom(metadata)
    return pb03.SendMessageRequest(request=message)


def _send_1(skill: str, task_id: str = "") -> pb.SendMessageRequest:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}],
               "metadata": {"skillId": skill}, **({"taskId": task_id} if task_id else {})}  # fmt: skip
    return ParseDict({"message": message}, pb.SendMessageRequest())


async def _both(agent: Agent, call: str, task_id: str = "") -> tuple[dict[str, Any], ...]:
    """The rich status of one refused call on the 1.0 and on the 0.3 service."""
    async with stubs(agent.grpc_address) as (v1, v03):
        if call == "GetTask":
            new = v1.GetTask(pb.GetTaskRequest(id="nope"))
            old = v03.GetTask(pb03.GetTaskRequest(name="tasks/nope"))
        else:
            new = v1.SendMessage(_send_1("demo.echo", task_id))
            old = v03.SendMessage(_send_03("demo.echo", task_id))
        return rich_status(await failure(new)), rich_status(await failure(old))


async def test_our_errors_carry_their_message_alone_on_0_3_as_on_1_0(agent: Agent) -> None:
    key = uuid.uuid4().hex
    parked = {"message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                          "parts": [{"data": {"key": key}}], "metadata": {"skillId": "demo.gate"}},
              "configuration": {"returnImmediately": True}}  # fmt: skip
    try:
        async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:
            held = await http.post("/message:send", json=parked, headers=V1)
        task_id = held.json()["task"]["id"]
        await GATES.wait_started(key)
        busy = await _both(agent, "SendMessage", task_id)  # TaskBusyError: it runs
        quota = await _both(agent, "SendMessage")  # QuotaExceededError: one unfinished task
    finally:
        GATES.release(key)
    for (new, old), reason in ((busy, "TASK_BUSY"), (quota, "QUOTA_EXCEEDED")):
        assert new["reason"] == old["reason"] == reason, (new, old)
        assert new["code"] == old["code"], (new, old)
        assert old["message"] == new["message"], (new, old)  # main: "TaskBusyError: ..."
        assert not any(name in old["message"] for name in OWN_NAMES), old


async def test_the_sdks_errors_keep_the_a2a_error_type_on_0_3(agent: Agent) -> None:
    new, old = await _both(agent, "GetTask")
    assert new["code"] == old["code"] == grpc.StatusCode.NOT_FOUND
    assert new["message"] == "Task not found"
    assert old["message"] == "TaskNotFoundError: Task not found"  # the SDK's 0.3 client reads it
