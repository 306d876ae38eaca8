"""A hostile gRPC client: what it sends past the protobuf and HTTP/2 edge is answered with
a typed status, the same every time, and good callers beside it are served.

- call metadata (grpc's HEADERS): grpc's default server refused metadata past 8 KiB only
  at random, up to its hard limit of 16 KiB, so a caller whose bearer token grew past
  8 KiB saw about one call in two fail ``RESOURCE_EXHAUSTED``; a value that is not UTF-8
  made grpcio log an ERROR traceback five times a call;
- a request message gzip-compressed on the wire is held to ``max_body_bytes`` decompressed;
- the services that need no credentials: ``Health/List`` raised inside grpcio (an ERROR
  traceback, the exception's class in the answer), and reflection described any ``.proto``
  the process had loaded.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import grpc
import grpc.aio
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState, a2a_pb2

from tests._h2raw import (
    END_HEADERS,
    HEADERS,
    Peer,
    frame,
    grpc_headers,
    header_block,
    message,
    undecodable_to_plain_server,
)
from tests.bindings._agent import Agent
from tests.bindings._grpc import failure, rich_status, stubs

#: the one limit on a call's metadata (``server/grpc.py``: grpc's hard limit)
METADATA_LIMIT = 16 * 1024


def _echo(text: str = "hi") -> SendMessageRequest:
    msg = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)])
    msg.metadata.update({"skillId": "demo.echo"})
    return SendMessageRequest(message=msg)


async def _code(call: Any) -> grpc.StatusCode:
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def test_metadata_under_the_limit_is_always_served_and_over_it_always_refused(
    agent: Agent,
) -> None:
    """40 calls with 12 KiB of metadata (a large bearer token) are all answered: before,
    grpc refused about half of them at random. Past 16 KiB every call is refused, and the
    next good call on the same channel is served."""
    under = (("x-claims", "c" * 12 * 1024),)
    over = (("x-claims", "c" * (METADATA_LIMIT + 1)),)
    missing = a2a_pb2.GetTaskRequest(id=f"missing-{uuid.uuid4().hex}")
    async with stubs(agent.grpc_address) as (v1, _v03):
        served = await asyncio.gather(
            *(_code(v1.GetTask(missing, metadata=under)) for _ in range(40))
        )
        refused = await asyncio.gather(
            *(_code(v1.GetTask(missing, metadata=over)) for _ in range(5))
        )
        after = await v1.SendMessage(_echo())
    assert set(served) == {grpc.StatusCode.NOT_FOUND}, served
    assert set(refused) == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert after.task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_gzip_bomb_is_held_to_max_body_bytes_decompressed(agent: Agent) -> None:
    """16 MiB of text, about 16 KB gzip-compressed on the wire: refused by its decompressed
    size (``max_body_bytes``, 1 MiB), as the same message sent plain is, and no task is
    made; a good compressed call is served."""
    bomb = _echo("a" * 16 * 1024 * 1024)
    list_all = a2a_pb2.ListTasksRequest()
    async with stubs(agent.grpc_address) as (v1, _v03):
        before = (await v1.ListTasks(list_all)).total_size
        zipped = rich_status(await failure(v1.SendMessage(bomb, compression=grpc.Compression.Gzip)))
        plain = rich_status(await failure(v1.SendMessage(bomb)))
        good = await v1.SendMessage(_echo(), compression=grpc.Compression.Gzip)
        after = (await v1.ListTasks(list_all)).total_size
    assert zipped["code"] == plain["code"] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in zipped["message"]
    assert good.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert after == before + 1


async def test_health_list_answers_what_check_answers(agent: Agent) -> None:
    """``grpc.health.v1.Health/List`` (no credentials needed): grpcio-health-checking
    leaves it to the generated base, which raised ``NotImplementedError``: each call was
    answered ``UNIMPLEMENTED`` "Unexpected <class 'NotImplementedError'>: ..." and logged an
    ERROR traceback with the server's paths. It now lists what ``Check`` answers."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    serving = health_pb2.HealthCheckResponse.SERVING
    async with grpc.aio.insecure_channel(agent.grpc_address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        listed = await health.List(health_pb2.HealthListRequest())
        checked = await health.Check(health_pb2.HealthCheckRequest(service=""))
    statuses = {name: entry.status for name, entry in listed.statuses.items()}
    assert statuses == {
        "": serving,
        "lf.a2a.v1.A2AService": serving,
        "a2a.v1.A2AService": serving,
    }
    assert checked.status == serving


def _internal_proto() -> None:
    """An application's own proto in the agent's process (its backend's client, say)."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName("acme/internal/billing.proto")
    except KeyError:
        proto = descriptor_pb2.FileDescriptorProto(name="acme/internal/billing.proto")
        proto.package = "acme.internal"
        proto.message_type.add(name="Invoice")
        method = proto.service.add(name="Billing").method.add(name="Charge")
        method.input_type = method.output_type = ".acme.internal.Invoice"
        pool.AddSerializedFile(proto.SerializeToString())


async def test_reflection_describes_the_served_services_and_nothing_else() -> None:
    """grpcio-reflection answered from protobuf's default pool: any ``.proto`` the process
    had loaded (an application's internal service) was described to anonymous callers who
    named it. Now only the served services' files (and their imports) are; the health
    service is served, so it is listed and described too."""
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    from tests.bindings._agent import serve_agent

    _internal_proto()
    ask = reflection_pb2.ServerReflectionRequest
    asked = [
        ask(file_containing_symbol="acme.internal.Billing"),
        ask(file_by_filename="acme/internal/billing.proto"),
        ask(file_containing_symbol="lf.a2a.v1.A2AService"),
        ask(file_containing_symbol="a2a.v1.A2AService"),
        ask(file_containing_symbol="grpc.health.v1.Health"),
    ]
    with serve_agent(grpc_reflection=True) as agent:
        async with grpc.aio.insecure_channel(agent.grpc_address) as channel:
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            answers = [
                a async for a in stub.ServerReflectionInfo(iter([ask(list_services=""), *asked]))
            ]
    listed = sorted(s.name for s in answers[0].list_services_response.service)
    assert listed == [
        "a2a.v1.A2AService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "lf.a2a.v1.A2AService",
    ]
    kinds = [a.WhichOneof("message_response") for a in answers[1:]]
    assert kinds == ["error_response"] * 2 + ["file_descriptor_response"] * 3
    assert {a.error_response.error_code for a in answers[1:3]} == {
        grpc.StatusCode.NOT_FOUND.value[0]
    }


async def test_a_metadata_value_that_is_not_utf8_is_served_without_error_records(
    agent: Agent, caplog: Any
) -> None:
    """grpcio logged an ERROR with a traceback each time such a call's metadata was read
    (five times a call), for any client that sent one; the value reaches the agent decoded
    as Latin-1, as an HTTP header does. The call is answered, and grpcio's records of it
    are DEBUG."""
    port = int(agent.grpc_address.rsplit(":", 1)[1])
    path = "/lf.a2a.v1.A2AService/SendMessage"
    peer = await Peer.open("127.0.0.1", port)
    try:
        peer.preface()
        head = grpc_headers("127.0.0.1", path) + header_block([("x-note", b"\xff\xfe")])
        peer.send(frame(HEADERS, END_HEADERS, 1, head))
        peer.finish_call(1, message(_echo().SerializeToString()))
        seen = await peer.until_ended(1, 30)
    finally:
        await peer.close()
    assert b"grpc-status\x010" in b"".join(seen.headers[1]), seen
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert [text for text in loud if "Invalid encoding" in text] == []


async def test_another_grpc_server_of_the_process_keeps_its_error_records(
    agent: Agent, caplog: Any
) -> None:
    """Our agent's gRPC server running changes nothing for another server of the process:
    grpcio's ERROR records of such a value sent to it stay as grpcio logs them."""

    await undecodable_to_plain_server(b"\xff")
    loud = [r for r in caplog.records if "Invalid encoding" in r.getMessage()]
    assert loud
    assert {r.levelno for r in loud} == {logging.ERROR}


async def test_a_list_filter_time_no_timestamp_holds_is_invalid_argument(
    agent: Agent, caplog: Any
) -> None:
    """``statusTimestampAfter`` outside years 1 to 9999, or nanos outside a second, which
    only gRPC can carry (ProtoJSON refuses them: -32602 / 400): before, the store's
    ``ToDatetime`` raised ``ValueError``, answered ``INTERNAL`` and logged at ERROR."""
    bad = [
        a2a_pb2.ListTasksRequest(status_timestamp_after={"seconds": 2**62}),
        a2a_pb2.ListTasksRequest(status_timestamp_after={"seconds": -(2**40)}),
        a2a_pb2.ListTasksRequest(status_timestamp_after={"seconds": 1, "nanos": -5}),
        a2a_pb2.ListTasksRequest(status_timestamp_after={"seconds": 1, "nanos": 10**9}),
    ]
    caplog.set_level(logging.ERROR)
    async with stubs(agent.grpc_address) as (v1, _v03):
        for request in bad:
            with_status = rich_status(await failure(v1.ListTasks(request)))
            assert with_status["code"] == grpc.StatusCode.INVALID_ARGUMENT, with_status
            assert with_status["reason"] == "INVALID_PARAMS", with_status
            assert "statusTimestampAfter" in with_status["message"], with_status
        last = {"seconds": 253402300799, "nanos": 999_999_999}  # 9999-12-31T23:59:59.999999999Z
        listed = await v1.ListTasks(a2a_pb2.ListTasksRequest(status_timestamp_after=last))
    assert list(listed.tasks) == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
