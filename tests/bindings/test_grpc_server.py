"""The gRPC server itself: card address, status codes and details, tracing, reflection, TLS."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.transports.grpc import GrpcTransport
from a2a.compat.v0_3 import a2a_v0_3_pb2
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
    a2a_pb2,
)
from google.protobuf.json_format import MessageToDict
from google.protobuf.unknown_fields import UnknownFieldSet
from grpc_reflection.v1alpha import reflection_pb2

from apcore_a2a import A2AServerFactory
from apcore_a2a.server.grpc import SERVICE_V0_3, SERVICE_V1
from tests._support import TLS, free_port, threaded_server
from tests.bindings._agent import GATES, Agent, build_registry, serve_agent
from tests.bindings._grpc import failure, list_services, rich_status, self_signed_cert, stubs
from tests.bindings._peers import (
    Peer,
    data,
    fetch_card,
    make_client,
    message,
    open_peer,
    send,
    text,
    transport_of,
)


def _send_request(skill: str, part: Part) -> a2a_pb2.SendMessageRequest:
    msg = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[part])
    msg.metadata.update({"skillId": skill})
    return SendMessageRequest(message=msg)


# -- the card ----------------------------------------------------------------------------
async def test_card_lists_grpc_1_0_and_0_3_at_a_scheme_less_address(agent: Agent) -> None:
    card = await fetch_card(agent.url)
    grpc_interfaces = [
        (i.url, i.protocol_version)
        for i in card.supported_interfaces
        if i.protocol_binding == "GRPC"
    ]
    assert grpc_interfaces == [(agent.grpc_address, "1.0"), (agent.grpc_address, "0.3")]


async def test_sdk_client_allowed_only_grpc_connects_from_the_served_card(agent: Agent) -> None:
    config = ClientConfig(
        streaming=False,
        supported_protocol_bindings=["GRPC"],
        grpc_channel_factory=grpc.aio.insecure_channel,
    )
    client = await ClientFactory(config).create_from_url(agent.url)
    try:
        assert type(transport_of(client)) is GrpcTransport
        peer = Peer("GRPC", "1.0", client, client)
        task = await send(peer, message(data({"a": 20, "b": 22}), skill="demo.add"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].data.struct_value["sum"] == 42
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("settings", "address"),
    [
        ({"url": "https://agent.example.com/a2a"}, "agent.example.com:7443"),
        ({"host": "::1"}, "[::1]:7443"),
        ({"host": "0.0.0.0"}, "127.0.0.1:7443"),
    ],
)
def test_card_address_follows_the_public_url(settings: dict[str, Any], address: str) -> None:
    _app, card = A2AServerFactory(build_registry(), environ={}, grpc_port=7443, **settings).create()
    assert [i.url for i in card.supported_interfaces if i.protocol_binding == "GRPC"] == [
        address,
        address,
    ]


def test_no_grpc_port_no_grpc_interface() -> None:
    _app, card = A2AServerFactory(build_registry(), environ={}).create()
    assert {i.protocol_binding for i in card.supported_interfaces} == {"JSONRPC", "HTTP+JSON"}


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"grpc_port": 0}, "grpc_port: must be between 1 and 65535"),
        ({"grpc_port": 70000}, "grpc_port: must be between 1 and 65535"),
        ({"grpc_port": 7443, "grpc_tls_cert": "cert.pem"}, "must be given together"),
        ({"grpc_port": 7443, "grpc_tls_key": "key.pem"}, "must be given together"),
        (
            {"grpc_port": 7443, "grpc_tls_cert": "/nonexistent/c.pem", "grpc_tls_key": "/k"},
            "cannot read gRPC TLS file",
        ),
    ],
)
def test_bad_grpc_settings_fail_at_create(settings: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        A2AServerFactory(build_registry(), environ={}, **settings).create()


async def test_traceparent_metadata_reaches_apcore_like_the_http_header(agent: Agent) -> None:
    trace_id = uuid.uuid4().hex
    traceparent = f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"
    card = await fetch_card(agent.url)
    async with (
        open_peer(card, "GRPC", "1.0", headers={"traceparent": traceparent}) as over_grpc,
        open_peer(card, "JSONRPC", "1.0", headers={"traceparent": traceparent}) as over_http,
    ):
        for peer in (over_grpc, over_http):
            task = await send(peer, message(text("t"), skill="demo.trace"))
            assert task.artifacts[0].parts[0].data.struct_value["trace"] == trace_id


# -- errors: the SDK's status codes and details --------------------------------------------
async def test_a2a_errors_carry_sdk_status_codes_and_error_info(agent: Agent) -> None:
    async with stubs(agent.grpc_address) as (v1, _v03):
        missing = rich_status(await failure(v1.GetTask(a2a_pb2.GetTaskRequest(id="nope"))))
        assert missing == {
            "code": grpc.StatusCode.NOT_FOUND,
            "message": "Task not found",
            "reason": "TASK_NOT_FOUND",
            "domain": "a2a-protocol.org",
        }

        done = await v1.SendMessage(_send_request("demo.echo", Part(text="x")))
        not_cancelable = rich_status(
            await failure(v1.CancelTask(CancelTaskRequest(id=done.task.id)))
        )
        assert not_cancelable["code"] == grpc.StatusCode.FAILED_PRECONDITION
        assert not_cancelable["reason"] == "TASK_NOT_CANCELABLE"

        bad_input = rich_status(
            await failure(v1.SendMessage(_send_request("demo.add", data({"a": "x", "b": 1}))))
        )
        assert bad_input["code"] == grpc.StatusCode.INVALID_ARGUMENT
        assert bad_input["reason"] == "INVALID_PARAMS"
        assert "/a" in bad_input["message"]

        unknown_skill = rich_status(
            await failure(v1.SendMessage(_send_request("demo.nope", Part(text="x"))))
        )
        assert unknown_skill["code"] == grpc.StatusCode.NOT_FOUND
        assert unknown_skill["reason"] == "METHOD_NOT_FOUND"


async def test_request_validation_errors_list_the_offending_fields(agent: Agent) -> None:
    async with stubs(agent.grpc_address) as (v1, _v03):
        empty = rich_status(await failure(v1.SendMessage(a2a_pb2.SendMessageRequest())))
        assert empty["code"] == grpc.StatusCode.INVALID_ARGUMENT
        assert empty["reason"] == "INVALID_PARAMS"
        assert "message" in empty["violations"]


async def test_0_3_service_reports_errors_the_0_3_way(agent: Agent) -> None:
    async with stubs(agent.grpc_address) as (_v1, v03):
        missing = await failure(v03.GetTask(a2a_v0_3_pb2.GetTaskRequest(name="tasks/nope")))
        assert missing.code() == grpc.StatusCode.NOT_FOUND
        assert missing.details() == "TaskNotFoundError: Task not found"

        bad_name = await failure(v03.CancelTask(a2a_v0_3_pb2.CancelTaskRequest(name="nonsense")))
        assert bad_name.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert bad_name.details().startswith("InvalidParamsError:")


async def test_errors_echoing_a_long_request_value_are_cut_as_on_json_rpc(agent: Agent) -> None:
    """An error message that repeats what the caller sent is cut to 500 characters on every
    binding. Main: JSON-RPC cut it; gRPC sent it whole, twice (``grpc-message`` and the
    status details), so a 5,000-character task id overflowed the client's 8 KiB metadata
    limit and the caller got ``RESOURCE_EXHAUSTED`` "Stream removed" instead of
    ``NOT_FOUND``; the 0.3 service echoed a 5,000-character resource name."""
    long_id = "z" * 5000
    follow_up = _send_request("demo.echo", Part(text="hi"))
    follow_up.message.task_id = long_id
    async with httpx.AsyncClient(timeout=30, verify=TLS) as http:
        call = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": MessageToDict(follow_up)}  # fmt: skip
        rpc = (await http.post(agent.url, json=call, headers={"A2A-Version": "1.0"})).json()
    assert rpc["error"]["code"] == -32001
    assert len(rpc["error"]["message"]) <= 500
    async with stubs(agent.grpc_address) as (v1, v03):
        missing = rich_status(await failure(v1.SendMessage(follow_up)))
        bad_name = await failure(v03.GetTask(a2a_v0_3_pb2.GetTaskRequest(name=long_id)))
    assert (missing["code"], missing["reason"]) == (grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")
    assert len(missing["message"]) <= 500
    assert bad_name.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert bad_name.details().startswith("InvalidParamsError: ")
    assert len(bad_name.details()) <= len("InvalidParamsError: ") + 500


@pytest.mark.parametrize("number", [float("nan"), float("inf")], ids=["nan", "infinity"])
async def test_a_number_json_cannot_hold_is_refused_before_a_task_exists(
    agent: Agent, number: float
) -> None:
    """Protobuf carries NaN and infinite numbers, JSON none. Main: a data part holding one
    made a task that JSON-RPC then answered -32603 (with the serializer's text) and REST
    500, and broke ListTasks for its owner; one in the request's metadata failed the task
    with an ERROR traceback. Now both are INVALID_ARGUMENT and nothing is stored."""
    poisoned = _send_request("demo.add", data({"a": 1, "b": 2}))
    poisoned.message.parts[0].data.struct_value.fields["extra"].number_value = number
    in_metadata = _send_request("demo.echo", Part(text="hi"))
    in_metadata.metadata.fields["x"].number_value = number
    list_tasks = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    async with httpx.AsyncClient(timeout=30, headers={"A2A-Version": "1.0"}, verify=TLS) as http:
        before = (await http.post(agent.url, json=list_tasks)).json()["result"]
        async with stubs(agent.grpc_address) as (v1, _v03):
            for request in (poisoned, in_metadata):
                refused = rich_status(await failure(v1.SendMessage(request)))
                assert refused["code"] == grpc.StatusCode.INVALID_ARGUMENT, refused
                assert refused["reason"] == "INVALID_PARAMS"
                assert "NaN or infinite" in refused["message"]
        after = (await http.post(agent.url, json=list_tasks)).json()["result"]
    assert after["totalSize"] == before["totalSize"]


class _FailingStore(InMemoryTaskStore):
    """A store whose reads of one task fail the way a broken database would."""

    async def get(self, task_id: str, context: Any = None) -> Any:
        if task_id == "explode":
            raise RuntimeError("connection to db failed: password=hunter2")
        return await super().get(task_id, context)


@pytest.fixture(scope="module")
def failing_agent() -> Iterator[Agent]:
    port, grpc_port = free_port(), free_port()
    app, _card = A2AServerFactory(
        build_registry(), environ={}, port=port, grpc_port=grpc_port, task_store=_FailingStore()
    ).create()
    with threaded_server(app, port=port) as url:
        yield Agent(url=url, grpc_address=f"127.0.0.1:{grpc_port}", app=app)


async def test_unexpected_errors_are_internal_and_do_not_leak(failing_agent: Agent) -> None:
    async with stubs(failing_agent.grpc_address) as (v1, v03):
        new = rich_status(await failure(v1.GetTask(a2a_pb2.GetTaskRequest(id="explode"))))
        assert new == {
            "code": grpc.StatusCode.INTERNAL,
            "message": "Internal error",
            "reason": "INTERNAL_ERROR",
            "domain": "a2a-protocol.org",
        }
        old = await failure(v03.GetTask(a2a_v0_3_pb2.GetTaskRequest(name="tasks/explode")))
        assert old.code() == grpc.StatusCode.INTERNAL
        assert "hunter2" not in old.details()
        # push is off on this agent: the SDK's FAILED_PRECONDITION (spec 1.0.1 §5.4)
        config = a2a_pb2.TaskPushNotificationConfig(task_id="t", url="https://example.com/h")
        push_off = rich_status(await failure(v1.CreateTaskPushNotificationConfig(config)))
        assert push_off["code"] == grpc.StatusCode.FAILED_PRECONDITION
        assert push_off["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"
        # the server keeps serving other calls
        ok = await v1.SendMessage(_send_request("demo.echo", Part(text="still here")))
        assert ok.task.status.state == TaskState.TASK_STATE_COMPLETED


# -- reflection ----------------------------------------------------------------------------
async def test_reflection_lists_both_a2a_services_when_enabled() -> None:
    with serve_agent(grpc_reflection=True) as agent:
        services = await list_services(agent.grpc_address)
    assert SERVICE_V1 in services
    assert SERVICE_V0_3 in services
    assert "grpc.reflection.v1alpha.ServerReflection" in services


async def test_reflection_is_off_by_default(agent: Agent) -> None:
    # A unary probe: a streaming one races the server's immediate UNIMPLEMENTED answer.
    async with grpc.aio.insecure_channel(agent.grpc_address) as channel:
        probe = channel.unary_unary(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        refused = await failure(probe(reflection_pb2.ServerReflectionRequest(list_services="")))
    assert refused.code() == grpc.StatusCode.UNIMPLEMENTED


# -- TLS -----------------------------------------------------------------------------------
async def test_tls_serves_secure_channels_only(tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path)
    trusted = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    with serve_agent(grpc_tls_cert=str(cert), grpc_tls_key=str(key)) as agent:
        card = await fetch_card(agent.url)
        client = make_client(
            card,
            "GRPC",
            "1.0",
            channel_factory=lambda url: grpc.aio.secure_channel(url, trusted),
        )
        try:
            task = await send(
                Peer("GRPC", "1.0", client, client), message(text("tls"), skill="demo.echo")
            )
            assert task.artifacts[0].parts[0].data.struct_value["text"] == "echo: tls"
        finally:
            await client.close()

        async with stubs(agent.grpc_address) as (plain, _v03):
            refused = await failure(plain.GetTask(a2a_pb2.GetTaskRequest(id="x"), timeout=5))
        assert refused.code() == grpc.StatusCode.UNAVAILABLE


# -- resumable streams ---------------------------------------------------------------------
async def test_grpc_streams_are_standard_and_resume_by_subscription(agent: Agent) -> None:
    """No field outside the A2A schema on any StreamResponse; a gRPC client resumes as the
    spec says, with SubscribeToTask, whose first event is the task as it stands."""
    key = uuid.uuid4().hex
    async with stubs(agent.grpc_address) as (v1, _v03):
        call = v1.SendStreamingMessage(_send_request("demo.gate", data({"key": key})))
        try:
            first = await call.read()
            call.cancel()  # the connection broke
            await GATES.wait_started(key)
            subscription = v1.SubscribeToTask(
                a2a_pb2.SubscribeToTaskRequest(id=first.task.id),
                metadata=[("last-event-id", "3")],
            )
            async with asyncio.timeout(20):  # metadata last-event-id is no resume point
                snapshot = await subscription.read()
            assert snapshot.task.status.state == TaskState.TASK_STATE_WORKING
        finally:
            GATES.release(key)
        rest = [snapshot]
        while (response := await subscription.read()) is not grpc.aio.EOF:
            rest.append(response)
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert not any(len(UnknownFieldSet(r)) for r in [first, *rest])


async def _drain(call: Any) -> None:
    async for _response in call:
        pass


class _HeldStream:
    """A plain SDK executor whose task works until it is canceled: a stream stays open."""

    async def execute(self, context: Any, event_queue: Any) -> None:
        from a2a.types import Task, TaskStatus

        working = TaskStatus(state=TaskState.TASK_STATE_WORKING)
        task = Task(id=context.task_id, context_id=context.context_id, status=working)
        await event_queue.enqueue_event(task)
        await asyncio.Event().wait()

    async def cancel(self, context: Any, event_queue: Any) -> None:
        from a2a.server.tasks import TaskUpdater

        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


async def test_a_grpc_server_of_its_own_holds_the_settings_stream_limit() -> None:
    """``GrpcServer`` beside a request handler of one's own (docs/grpc.md), without the
    factory's shared limiter, still refuses streams past ``max_streams``."""
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

    from apcore_a2a.server.grpc import GrpcServer
    from apcore_a2a.settings import Settings

    handler = DefaultRequestHandler(
        agent_executor=_HeldStream(),  # type: ignore[arg-type]
        task_store=InMemoryTaskStore(),
        agent_card=AgentCard(
            name="held",
            description="holds a stream",
            version="1",
            supported_interfaces=[AgentInterface(url="127.0.0.1:1", protocol_binding="GRPC")],
            capabilities=AgentCapabilities(streaming=True),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id="any", name="any", description="any", tags=["any"])],
        ),
    )
    settings = Settings.resolve({"grpc_port": free_port(), "max_streams": 1}, environ={})
    server = GrpcServer(handler, settings)
    await server.start()
    try:
        async with stubs(server.address) as (v1, _v03):
            held = v1.SendStreamingMessage(_send_request("any", Part(text="hold")))
            assert (await held.read()).task.id
            refused = v1.SendStreamingMessage(_send_request("any", Part(text="second")))
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await refused.read()
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            held.cancel()
    finally:
        await server.stop(grace=0)


# -- idle connections ---------------------------------------------------------------------
@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_an_idle_connection_is_closed_and_the_sdk_client_calls_again(version: str) -> None:
    """``header_timeout`` bounds a gRPC connection's wait for its next call as it bounds an
    HTTP connection's wait for its next request head: without calls, the connection is
    closed with GOAWAY. The official client's channel goes IDLE, and its next call
    reconnects, unnoticed by the caller."""
    channels: list[grpc.aio.Channel] = []

    def channel_factory(address: str) -> grpc.aio.Channel:
        channels.append(grpc.aio.insecure_channel(address))
        return channels[-1]

    with serve_agent(header_timeout=1) as agent:
        card = await fetch_card(agent.url)
        client = make_client(card, "GRPC", version, channel_factory=channel_factory)
        peer = Peer("GRPC", version, client, client)
        try:
            first = await send(peer, message(text("one"), skill="demo.echo"))
            assert first.status.state == TaskState.TASK_STATE_COMPLETED
            (channel,) = channels
            state = channel.get_state()
            assert state == grpc.ChannelConnectivity.READY
            async with asyncio.timeout(60):  # hang guard: the server never closing it
                while state != grpc.ChannelConnectivity.IDLE:
                    await channel.wait_for_state_change(state)
                    state = channel.get_state()
            second = await send(peer, message(text("two"), skill="demo.echo"))
            assert second.status.state == TaskState.TASK_STATE_COMPLETED
            assert channel.get_state() == grpc.ChannelConnectivity.READY
            assert len(channels) == 1, "the same channel reconnected"
        finally:
            await client.close()
