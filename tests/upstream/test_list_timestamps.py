"""The SDK behaviour ``apcore_a2a/upstream/list_timestamps.py`` answers: a plain a2a-sdk
agent answers a gRPC ``ListTasks`` whose ``status_timestamp_after`` no ``Timestamp``
holds with ``UNKNOWN``, naming Python's ``ValueError`` (its store's ``ToDatetime``). A
failure here means the SDK refuses such a time itself: delete that file."""

from __future__ import annotations

import grpc
from a2a.types import a2a_pb2, a2a_pb2_grpc

from tests._support import threaded_server
from tests.upstream._plain import plain_agent


def test_sdk_fails_on_a_list_time_no_timestamp_holds() -> None:
    app, grpc_port = plain_agent()
    request = a2a_pb2.ListTasksRequest(status_timestamp_after={"seconds": 2**62})
    with threaded_server(app), grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            stub.ListTasks(request, metadata=[("a2a-version", "1.0")], timeout=30)
        except grpc.RpcError as exc:
            code, details = exc.code(), exc.details()
        else:  # pragma: no cover - the SDK refuses it now
            code, details = grpc.StatusCode.OK, ""
    assert code == grpc.StatusCode.UNKNOWN
    assert "ValueError" in details
