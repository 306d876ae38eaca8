"""The SDK behaviour ``apcore_a2a/upstream/grpc03_names.py`` answers: a2a-sdk's 0.3 gRPC
servicer refuses an empty ``parent`` of ``CreateTaskPushNotificationConfig`` with a bare
"No task for", reads a resource name by its prefix (``tasks/<id>/more`` is task
``<id>``), and refuses a get by task id alone (``tasks/<id>/pushNotificationConfigs/``,
as its own 0.3 client sends it). A failure here means the SDK checks 0.3 names whole: delete that file."""

from __future__ import annotations

import grpc
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc

from tests._support import threaded_server
from tests.upstream._plain import plain_agent


def test_sdk_03_grpc_reads_resource_names_by_prefix_and_answers_an_empty_one_bare() -> None:
    app, grpc_port = plain_agent()
    with threaded_server(app), grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = a2a_v0_3_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        config = pb03.TaskPushNotificationConfig(
            push_notification_config=pb03.PushNotificationConfig(url="http://127.0.0.1:9/h")
        )
        refusals = []
        for call in (
            lambda: stub.CreateTaskPushNotificationConfig(
                pb03.CreateTaskPushNotificationConfigRequest(config=config), timeout=10
            ),
            lambda: stub.GetTask(pb03.GetTaskRequest(name="tasks/no-such-task/more"), timeout=10),
            lambda: stub.GetTaskPushNotificationConfig(
                pb03.GetTaskPushNotificationConfigRequest(name="tasks/t/pushNotificationConfigs/"),
                timeout=10,
            ),
        ):
            try:
                call()
            except grpc.RpcError as error:
                refusals.append((error.code(), error.details()))  # type: ignore[attr-defined]
    assert refusals == [
        (grpc.StatusCode.INVALID_ARGUMENT, "InvalidParamsError: No task for "),
        (grpc.StatusCode.NOT_FOUND, "TaskNotFoundError: Task not found"),
        (
            grpc.StatusCode.INVALID_ARGUMENT,
            "InvalidParamsError: Bad resource name tasks/t/pushNotificationConfigs/",
        ),
    ]
