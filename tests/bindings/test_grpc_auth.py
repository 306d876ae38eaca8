"""gRPC callers authenticate with call metadata and get the same identities as over HTTP."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import grpc.aio
import jwt
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2
from a2a.types import (
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskNotFoundError,
    TaskState,
    a2a_pb2,
)
from apcore import Registry
from pydantic import BaseModel

from apcore_a2a import A2AServerFactory
from apcore_a2a.auth import current_identity
from tests._support import free_port, threaded_server
from tests.bindings._agent import Agent, build_registry
from tests.bindings._grpc import failure, list_services, stubs
from tests.bindings._peers import fetch_card, message, open_peer, send, text

ALICE_KEY = "alice-" + secrets.token_hex(16)
BOB_KEY = "bob-" + secrets.token_hex(16)
JWT_SECRET = secrets.token_urlsafe(48)


def bearer(sub: str, secret: str = JWT_SECRET) -> str:
    token = jwt.encode({"sub": sub, "exp": int(time.time()) + 600}, secret, algorithm="HS256")
    return f"Bearer {token}"


class WhoIn(BaseModel):
    text: str = ""


class WhoOut(BaseModel):
    caller: str


class WhoAmI:
    input_schema = WhoIn
    output_schema = WhoOut
    description = "Report who apcore thinks the caller is"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        identity = context.identity
        return {"caller": identity.id if identity is not None else "anonymous"}


class CurrentIdentity(WhoAmI):
    description = "Report who apcore_a2a.auth.current_identity() says the caller is"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        identity = current_identity()
        return {"caller": identity.id if identity is not None else "anonymous"}


class CurrentIdentityAsync(WhoAmI):
    description = "current_identity(), from a module that runs on the event loop"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:  # type: ignore[override]
        identity = current_identity()
        return {"caller": identity.id if identity is not None else "anonymous"}


def _registry() -> Registry:
    registry = build_registry()
    registry.register("demo.whoami", WhoAmI())
    registry.register("demo.current", CurrentIdentity())
    registry.register("demo.current_async", CurrentIdentityAsync())
    return registry


def _serve(**settings: Any) -> Iterator[Agent]:
    port, grpc_port = free_port(), free_port()
    app, _card = A2AServerFactory(
        _registry(),
        environ={},
        port=port,
        grpc_port=grpc_port,
        api_keys=(f"{ALICE_KEY}=alice", f"{BOB_KEY}=bob"),
        auth_key=JWT_SECRET,
        **settings,
    ).create()
    with threaded_server(app, port=port) as url:
        yield Agent(url=url, grpc_address=f"127.0.0.1:{grpc_port}", app=app)


@pytest.fixture(scope="module")
def secured() -> Iterator[Agent]:
    """Credentials required (the default); reflection on."""
    yield from _serve(grpc_reflection=True)


@pytest.fixture(scope="module")
def open_door() -> Iterator[Agent]:
    """Anonymous callers allowed; presented credentials are still checked."""
    yield from _serve(require_auth=False)


def _send(skill: str, value: str = "hi") -> a2a_pb2.SendMessageRequest:
    msg = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=value)])
    msg.metadata.update({"skillId": skill})
    return SendMessageRequest(message=msg)


def _caller(task: Any) -> str:
    return str(task.artifacts[0].parts[0].data.struct_value["caller"])


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        (("x-api-key", "not-a-key"),),
        (("authorization", bearer("mallory", secret="x" * 48)),),
        (("authorization", "Bearer not.a.jwt"),),
    ],
    ids=["none", "unknown-api-key", "jwt-wrong-secret", "garbage-jwt"],
)
async def test_calls_without_valid_credentials_are_unauthenticated(
    secured: Agent, metadata: Any
) -> None:
    async with stubs(secured.grpc_address) as (v1, v03):
        new = await failure(v1.SendMessage(_send("demo.whoami"), metadata=metadata))
        old = await failure(
            v03.GetTask(a2a_v0_3_pb2.GetTaskRequest(name="tasks/x"), metadata=metadata)
        )
        stream = v1.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id="x"), metadata=metadata)
        streamed = await failure(stream.read())
    for error in (new, old, streamed):
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        # 0.3 too: the message alone, no class name before it
        assert error.details() == "Missing or invalid credentials"
        assert "not-a-key" not in error.details()


def _every_a2a_method() -> list[tuple[str, bool]]:
    """``(path, server streaming)`` of every method of both A2A services, read from the
    SDK's descriptors, so a method a new SDK adds is covered without editing this test."""
    return [
        (f"/{service.full_name}/{method.name}", method.server_streaming)
        for module in (a2a_pb2, a2a_v0_3_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    ]


async def test_every_method_of_both_services_refuses_a_caller_without_credentials(
    secured: Agent,
) -> None:
    methods = _every_a2a_method()
    assert len(methods) >= 20  # 11 + 10 today
    as_is = {"request_serializer": bytes, "response_deserializer": bytes}
    bad_first = (("x-api-key", "not-a-key"), ("x-api-key", ALICE_KEY))
    async with grpc.aio.insecure_channel(secured.grpc_address) as channel:
        for path, streaming in methods:
            version = "0.3" if path.startswith("/a2a.v1.") else "1.0"
            # The first of a repeated key counts, as the first of a repeated HTTP header.
            for metadata in (None, (("x-api-key", ""),), bad_first):
                sent = (("a2a-version", version), *(metadata or ()))
                if streaming:
                    call = channel.unary_stream(path, **as_is)(b"", metadata=sent)
                    error = await failure(call.read())
                else:
                    error = await failure(channel.unary_unary(path, **as_is)(b"", metadata=sent))
                assert error.code() == grpc.StatusCode.UNAUTHENTICATED, (path, metadata)


@pytest.mark.parametrize(
    ("credential", "who"),
    [
        (lambda: ("x-api-key", ALICE_KEY), "alice"),
        # Signed when the test runs: a token made at collection expires in a long run.
        (lambda: ("authorization", bearer("carol")), "carol"),
    ],
    ids=["api-key", "bearer-jwt"],
)
async def test_identity_reaches_the_module(secured: Agent, credential: Any, who: str) -> None:
    async with stubs(secured.grpc_address) as (v1, _v03):
        response = await v1.SendMessage(_send("demo.whoami"), metadata=(credential(),))
    assert _caller(response.task) == who


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
@pytest.mark.parametrize("skill", ["demo.current", "demo.current_async"])
async def test_current_identity_answers_the_caller_in_a_module_on_every_binding(
    secured: Agent, binding: str, skill: str
) -> None:
    """The public ``current_identity()`` (docs/auth.md) names the caller inside a module,
    a plain ``def execute`` (on the agent's worker threads) as an async one, whichever
    binding the call came on."""
    card = await fetch_card(secured.url)
    async with open_peer(card, binding, "1.0", headers={"X-API-Key": ALICE_KEY}) as alice:
        created = await send(alice, message(text("who"), skill=skill))
    assert _caller(created) == "alice"


async def test_tasks_are_owned_by_the_same_identity_on_every_binding(secured: Agent) -> None:
    card = await fetch_card(secured.url)
    alice, bob = {"X-API-Key": ALICE_KEY}, {"X-API-Key": BOB_KEY}
    async with (
        open_peer(card, "GRPC", "1.0", headers=alice) as alice_grpc,
        open_peer(card, "JSONRPC", "1.0", headers=alice) as alice_rpc,
        open_peer(card, "GRPC", "0.3", headers=alice) as alice_grpc_old,
        open_peer(card, "GRPC", "1.0", headers=bob) as bob_grpc,
        open_peer(card, "HTTP+JSON", "1.0", headers=bob) as bob_rest,
    ):
        created = await send(alice_grpc, message(text("mine"), skill="demo.whoami"))
        assert _caller(created) == "alice"
        request = GetTaskRequest(id=created.id)
        over_http = await alice_rpc.client.get_task(request, context=alice_rpc.call_context)
        over_old = await alice_grpc_old.client.get_task(
            request, context=alice_grpc_old.call_context
        )
        assert over_http.id == over_old.id == created.id

        for peer in (bob_grpc, bob_rest):
            with pytest.raises(TaskNotFoundError):
                await peer.client.get_task(request, context=peer.call_context)
            listed = await peer.client.list_tasks(
                ListTasksRequest(context_id=created.context_id), context=peer.call_context
            )
            assert list(listed.tasks) == []

        # streaming calls carry the identity too
        events = [
            e
            async for e in alice_grpc.streaming.send_message(
                message(text("streamed"), skill="demo.whoami"), context=alice_grpc.call_context
            )
        ]
        final = [e.status_update for e in events if e.HasField("status_update")][-1]
        assert final.status.state == TaskState.TASK_STATE_COMPLETED
        streamed = await alice_rpc.client.get_task(
            GetTaskRequest(id=final.task_id), context=alice_rpc.call_context
        )
        assert _caller(streamed) == "alice"
        with pytest.raises(TaskNotFoundError):
            async for _ in bob_grpc.streaming.subscribe(
                SubscribeToTaskRequest(id=final.task_id), context=bob_grpc.call_context
            ):
                pass

        # and the other way round: created over HTTP, found over gRPC by its owner only
        via_http = await send(alice_rpc, message(text("also mine"), skill="demo.echo"))
        found = await alice_grpc.client.get_task(
            GetTaskRequest(id=via_http.id), context=alice_grpc.call_context
        )
        assert found.id == via_http.id
        with pytest.raises(TaskNotFoundError):
            await bob_grpc.client.get_task(
                GetTaskRequest(id=via_http.id), context=bob_grpc.call_context
            )


async def test_reflection_needs_no_credentials(secured: Agent) -> None:
    assert "lf.a2a.v1.A2AService" in await list_services(secured.grpc_address)


async def test_a_request_that_does_not_decode_is_refused_after_admission(secured: Agent) -> None:
    """As HTTP answers a body it cannot parse after its 401: corrupt request bytes get
    UNAUTHENTICATED without credentials, INVALID_ARGUMENT with them; health and reflection
    (no credentials) answer them INVALID_ARGUMENT too (main: UNKNOWN on every service,
    naming protobuf's ``DecodeError``)."""
    corrupt = b"\xff" * 4
    versioned = (("a2a-version", "1.0"),)
    async with grpc.aio.insecure_channel(secured.grpc_address) as channel:
        send = channel.unary_unary("/lf.a2a.v1.A2AService/SendMessage")
        anonymous = await failure(send(corrupt, metadata=versioned))
        known = await failure(send(corrupt, metadata=(*versioned, ("x-api-key", ALICE_KEY))))
        check = await failure(channel.unary_unary("/grpc.health.v1.Health/Check")(corrupt))
        watch = await failure(
            _drained(channel.unary_stream("/grpc.health.v1.Health/Watch")(corrupt))
        )
        reflect = channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
        )
        reflected = await failure(_drained(reflect(iter([corrupt]))))
    assert anonymous.code() == grpc.StatusCode.UNAUTHENTICATED
    for refused in (known, check, watch, reflected):
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, refused
        assert "DecodeError" not in str(refused.details())


async def _drained(stream: Any) -> None:
    async for _ in stream:
        pass


async def test_anonymous_calls_pass_when_auth_is_optional(open_door: Agent) -> None:
    async with stubs(open_door.grpc_address) as (v1, _):
        anonymous = await v1.SendMessage(_send("demo.whoami"))
        assert _caller(anonymous.task) == "anonymous"
        known = await v1.SendMessage(_send("demo.whoami"), metadata=(("x-api-key", BOB_KEY),))
        assert _caller(known.task) == "bob"
        # bad credentials are rejected, never downgraded to anonymous
        bad = await failure(v1.SendMessage(_send("demo.whoami"), metadata=(("x-api-key", "no"),)))
        assert bad.code() == grpc.StatusCode.UNAUTHENTICATED
        # anonymous callers share one bucket, and bob's task is not in it
        hidden = await failure(v1.GetTask(a2a_pb2.GetTaskRequest(id=known.task.id)))
        assert hidden.code() == grpc.StatusCode.NOT_FOUND
