"""Owner namespacing holds on gRPC too: the API key named alice and JWT sub=alice differ,
and no method of the 1.0 or 0.3 service reaches another caller's task or push config."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import jwt
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as p03
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)

from apcore_a2a import A2AServerFactory
from tests._support import free_port, threaded_server
from tests.bindings._agent import build_registry
from tests.bindings._grpc import failure, stubs

from .agent import message, serve_agent

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


@pytest.fixture(scope="module")
def push_address() -> Iterator[str]:
    grpc_port = free_port()
    with serve_agent(
        auth_key=SECRET, grpc_port=grpc_port, push_notifications=True, push_allow_insecure_urls=True
    ):
        yield f"127.0.0.1:{grpc_port}"


def as_user(sub: str) -> tuple[tuple[str, str], ...]:
    token = jwt.encode({"sub": sub, "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")
    return (("authorization", f"Bearer {token}"),)


async def first_event(stream: Any) -> Any:
    async for event in stream:
        return event
    raise AssertionError("the stream ended without an event")


async def test_no_method_of_either_service_reaches_another_callers_task(push_address: str) -> None:
    alice, bob = as_user("alice"), as_user("bob")
    async with stubs(push_address) as (v1, v03):
        request = message("demo.wait")
        request.configuration.return_immediately = True
        task = (await v1.SendMessage(request, metadata=alice)).task
        hook = TaskPushNotificationConfig(task_id=task.id, id="c1", url="http://127.0.0.1:9/h")
        await v1.CreateTaskPushNotificationConfig(hook, metadata=alice)
        name, config = f"tasks/{task.id}", f"tasks/{task.id}/pushNotificationConfigs/c1"
        other = TaskPushNotificationConfig(task_id=task.id, id="c2", url="http://127.0.0.1:9/b")
        attempts = {
            "GetTask": v1.GetTask(GetTaskRequest(id=task.id), metadata=bob),
            "CancelTask": v1.CancelTask(CancelTaskRequest(id=task.id), metadata=bob),
            "SubscribeToTask": first_event(
                v1.SubscribeToTask(SubscribeToTaskRequest(id=task.id), metadata=bob)
            ),
            "Create push": v1.CreateTaskPushNotificationConfig(other, metadata=bob),
            "Get push": v1.GetTaskPushNotificationConfig(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="c1"), metadata=bob
            ),
            "List push": v1.ListTaskPushNotificationConfigs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id), metadata=bob
            ),
            "Delete push": v1.DeleteTaskPushNotificationConfig(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="c1"), metadata=bob
            ),
            "0.3 GetTask": v03.GetTask(p03.GetTaskRequest(name=name), metadata=bob),
            "0.3 CancelTask": v03.CancelTask(p03.CancelTaskRequest(name=name), metadata=bob),
            "0.3 TaskSubscription": first_event(
                v03.TaskSubscription(p03.TaskSubscriptionRequest(name=name), metadata=bob)
            ),
            "0.3 Get push": v03.GetTaskPushNotificationConfig(
                p03.GetTaskPushNotificationConfigRequest(name=config), metadata=bob
            ),
            "0.3 List push": v03.ListTaskPushNotificationConfig(
                p03.ListTaskPushNotificationConfigRequest(parent=name), metadata=bob
            ),
            "0.3 Delete push": v03.DeleteTaskPushNotificationConfig(
                p03.DeleteTaskPushNotificationConfigRequest(name=config), metadata=bob
            ),
        }
        codes = {what: (await failure(call)).code() for what, call in attempts.items()}
        assert codes == dict.fromkeys(attempts, grpc.StatusCode.NOT_FOUND)
        for listed in (
            ListTasksRequest(context_id=task.context_id),
            ListTasksRequest(status=TaskState.TASK_STATE_WORKING),
            ListTasksRequest(),
        ):
            assert list((await v1.ListTasks(listed, metadata=bob)).tasks) == []
        # alice's task and hook are untouched; she can still cancel it
        kept = await v1.GetTaskPushNotificationConfig(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="c1"), metadata=alice
        )
        assert kept.url == hook.url
        canceled = await v1.CancelTask(CancelTaskRequest(id=task.id), metadata=alice)
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
