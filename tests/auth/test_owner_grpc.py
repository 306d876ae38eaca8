"""Owner namespacing holds on gRPC too: the API key named alice and JWT sub=alice differ."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterator

import grpc
import jwt
import pytest
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

from apcore_a2a import A2AServerFactory
from tests._support import free_port, threaded_server
from tests.bindings._agent import build_registry
from tests.bindings._grpc import failure, stubs

API_KEY = "alice-" + secrets.token_hex(16)
SECRET = secrets.token_urlsafe(48)


@pytest.fixture(scope="module")
def grpc_address() -> Iterator[str]:
    port, grpc_port = free_port(), free_port()
    app, _card = A2AServerFactory(
        build_registry(),
        environ={},
        port=port,
        grpc_port=grpc_port,
        api_keys=(f"{API_KEY}=alice",),
        auth_key=SECRET,
    ).create()
    with threaded_server(app, port=port):
        yield f"127.0.0.1:{grpc_port}"


def echo() -> SendMessageRequest:
    msg = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text="hi")])
    msg.metadata.update({"skillId": "demo.echo"})
    return SendMessageRequest(message=msg)


async def test_equal_names_from_two_authenticators_do_not_share_tasks(grpc_address: str) -> None:
    token = jwt.encode({"sub": "alice", "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")
    as_key = (("x-api-key", API_KEY),)
    as_jwt = (("authorization", f"Bearer {token}"),)
    async with stubs(grpc_address) as (v1, _v03):
        created = {
            "key": (await v1.SendMessage(echo(), metadata=as_key)).task,
            "jwt": (await v1.SendMessage(echo(), metadata=as_jwt)).task,
        }
        assert all(t.status.state == TaskState.TASK_STATE_COMPLETED for t in created.values())
        for mine, theirs, metadata in (("key", "jwt", as_key), ("jwt", "key", as_jwt)):
            own = await v1.GetTask(GetTaskRequest(id=created[mine].id), metadata=metadata)
            assert own.id == created[mine].id
            error = await failure(
                v1.GetTask(GetTaskRequest(id=created[theirs].id), metadata=metadata)
            )
            assert error.code() == grpc.StatusCode.NOT_FOUND
