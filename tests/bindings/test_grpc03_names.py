"""A 0.3 gRPC call whose resource name is malformed is ``INVALID_ARGUMENT`` saying which
field, the form it must have and the name given (``upstream/grpc03_names.py``), and touches no
stored task: a2a-sdk alone answered an empty ``parent`` (the 0.3
``CreateTaskPushNotificationConfig`` as most clients send it) with a bare "No task for",
and served ``tasks/<id>/more`` as task ``<id>``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.types import GetTaskPushNotificationConfigRequest, TaskPushNotificationConfig
from apcore import Executor, Registry
from starlette.applications import Starlette

from apcore_a2a import A2AServerFactory
from apcore_a2a._text import echoed
from tests._modules import Echo
from tests._sdk import make_client, request
from tests._support import free_port, running_server
from tests.bindings._grpc import stubs

TASK, CONFIG = "tasks/{taskId}", "tasks/{taskId}/pushNotificationConfigs/{configId}"
HOOK = pb03.TaskPushNotificationConfig(
    push_notification_config=pb03.PushNotificationConfig(url="http://127.0.0.1:9/hook")
)


def _not(name: str) -> str:
    """How a refusal names what was given: whole, quoted, bounded."""
    return f", not {echoed(name, quote=True)}"


def _calls(task: str) -> list[tuple[str, Callable[[Any], Any], str]]:
    """(what is sent, the call on a 0.3 stub, the message it must get)."""
    return [
        (
            "create without parent",
            lambda s: s.CreateTaskPushNotificationConfig(
                pb03.CreateTaskPushNotificationConfigRequest(config=HOOK)
            ),
            f"parent must be {TASK}, and none was given",
        ),
        (
            "create under a config's name",
            lambda s: s.CreateTaskPushNotificationConfig(
                pb03.CreateTaskPushNotificationConfigRequest(
                    parent=f"{task}/pushNotificationConfigs/c", config=HOOK
                )
            ),
            f"parent must be {TASK}{_not(f'{task}/pushNotificationConfigs/c')}",
        ),
        (
            "get by the task's name",
            lambda s: s.GetTaskPushNotificationConfig(
                pb03.GetTaskPushNotificationConfigRequest(name=task)
            ),
            f"name must be {CONFIG}{_not(task)}",
        ),
        (
            "list without parent",
            lambda s: s.ListTaskPushNotificationConfig(
                pb03.ListTaskPushNotificationConfigRequest()
            ),
            f"parent must be {TASK}, and none was given",
        ),
        (
            "delete by a bare id",
            lambda s: s.DeleteTaskPushNotificationConfig(
                pb03.DeleteTaskPushNotificationConfigRequest(name="c")
            ),
            f"name must be {CONFIG}{_not('c')}",
        ),
        (
            "get a task without name",
            lambda s: s.GetTask(pb03.GetTaskRequest()),
            f"name must be {TASK}, and none was given",
        ),
        (
            "cancel a task's sub-name",
            lambda s: s.CancelTask(pb03.CancelTaskRequest(name=f"{task}/x")),
            f"name must be {TASK}{_not(f'{task}/x')}",
        ),
    ]


def _echo_agent() -> tuple[Starlette, int, int]:
    """An agent serving ``t.echo`` with push on: its app, HTTP port and gRPC port."""
    registry = Registry()
    registry.register("t.echo", Echo())
    port, grpc_port = free_port(), free_port()
    app, _ = A2AServerFactory(
        Executor(registry),
        environ={},
        port=port,
        grpc_port=grpc_port,
        push_notifications=True,
        push_allow_insecure_urls=True,
    ).create()
    return app, port, grpc_port


async def test_a_malformed_03_resource_name_is_invalid_argument_in_full() -> None:
    app, port, grpc_port = _echo_agent()
    async with (
        running_server(app, port=port),
        stubs(f"127.0.0.1:{grpc_port}") as (_v1, v03),
    ):
        sent = pb03.SendMessageRequest(
            request=pb03.Message(
                message_id="m-1",
                role=pb03.ROLE_USER,
                content=[pb03.Part(text="hi")],
            )
        )
        task = f"tasks/{(await v03.SendMessage(sent)).task.id}"
        for label, call, message in _calls(task):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call(v03)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, label
            assert refused.value.details() == f"InvalidParamsError: {message}", label
        stream = v03.TaskSubscription(pb03.TaskSubscriptionRequest(name=""))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            [event async for event in stream]
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (
            refused.value.details()
            == f"InvalidParamsError: name must be {TASK}, and none was given"
        )
        # The task is untouched, and a well-formed name still serves.
        got = await v03.GetTask(pb03.GetTaskRequest(name=task))
        assert got.status.state == pb03.TASK_STATE_COMPLETED
        listed = await v03.ListTaskPushNotificationConfig(
            pb03.ListTaskPushNotificationConfigRequest(parent=task)
        )
        assert list(listed.configs) == []


async def test_a_03_get_by_task_id_alone_answers_the_config_named_by_the_task() -> None:
    """JSON-RPC 0.3 gets a config by task id alone (``pushNotificationConfigId``
    optional: the config whose id defaulted to the task's); a2a-sdk's 0.3 gRPC client
    sends such a get as ``tasks/{id}/pushNotificationConfigs/``, and gets that config too."""
    app, port, _grpc = _echo_agent()
    async with running_server(app, port=port):
        client = await make_client(f"http://127.0.0.1:{port}", "GRPC", "0.3")
        try:
            sent = [r async for r in client.send_message(request("t.echo", {"text": "hi"}))]
            task_id = sent[-1].task.id
            assert task_id
            made = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task_id, url="http://127.0.0.1:9/hook")
            )
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id)
            )
        finally:
            await client.close()
    assert made.id == task_id
    assert (got.task_id, got.id, got.url) == (task_id, task_id, "http://127.0.0.1:9/hook")
