"""The SDK behaviour the version rule answers on gRPC (``apcore_a2a.classify.version_error``,
one rule for every binding): a2a-sdk's gRPC servicer serves a call announcing a version it
does not speak, and a call announcing none (0.3 to spec §3.6.2) on the 1.0 service. A
failure here means a2a-sdk checks ``a2a-version`` on gRPC itself now: the interceptor's
call of the rule can go (HTTP keeps it for its message)."""

from __future__ import annotations

import grpc
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc

from tests._support import threaded_server
from tests.upstream._plain import plain_agent


@pytest.mark.parametrize("announced", [[("a2a-version", "9.0")], []], ids=["9.0", "none"])
def test_sdk_grpc_serves_a_call_of_another_version(announced: list[tuple[str, str]]) -> None:
    app, grpc_port = plain_agent()
    with threaded_server(app), grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            stub.GetTask(a2a_pb2.GetTaskRequest(id="no-such-task"), metadata=announced, timeout=10)
        except grpc.RpcError as error:
            code = error.code()  # type: ignore[attr-defined]
    # served (the task is unknown); spec §3.6.2 wants VersionNotSupportedError
    assert code == grpc.StatusCode.NOT_FOUND
