"""The SDK behaviour ``apcore_a2a/upstream/grpc_version.py`` answers: its gRPC servicer
serves a call that announces a version it does not speak. A failure here means a2a-sdk
checks ``a2a-version`` itself now: delete that file."""

from __future__ import annotations

import grpc
from a2a.types import a2a_pb2, a2a_pb2_grpc

from tests._support import threaded_server
from tests.upstream._plain import plain_agent


def test_sdk_grpc_serves_a_call_announcing_an_unknown_version() -> None:
    app, grpc_port = plain_agent()
    with threaded_server(app), grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            stub.GetTask(
                a2a_pb2.GetTaskRequest(id="no-such-task"),
                metadata=[("a2a-version", "9.0")],
                timeout=10,
            )
        except grpc.RpcError as error:
            code = error.code()  # type: ignore[attr-defined]
    assert code == grpc.StatusCode.NOT_FOUND  # served; the spec wants UNIMPLEMENTED
