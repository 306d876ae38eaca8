"""A context belongs to the owner of its tasks: bob cannot start a task in alice's context.

Before, a message naming alice's ``contextId`` (no task id) was accepted on every binding
and a task owned by bob was created in alice's context; modules that keep conversation
state by ``a2a.context_id`` then let bob read or change alice's conversation. Now it is
invalid params (-32602 / 400 / ``INVALID_ARGUMENT``), nothing is stored and no module runs,
in every store (memory, SQLite, PostgreSQL), across two agents on one database, and when
alice and bob race to open the same fresh context (one agent: exactly one wins).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.auth.user import UnauthenticatedUser
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.server.context import ServerCallContext
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError
from apcore import Registry
from google.protobuf.json_format import ParseDict
from pydantic import BaseModel

from apcore_a2a import A2AServerFactory
from apcore_a2a.storage.contexts import ContextGuard
from apcore_a2a.storage.memory import BoundedMemoryTaskStore, OwnerUser
from tests._postgres import pg_schema_url
from tests._support import TLS, free_port, threaded_server
from tests.bindings._grpc import rich_status, stubs

KEYS = {"alice": "alice-" + secrets.token_hex(16), "bob": "bob-" + secrets.token_hex(16)}
CELLS = [
    ("JSONRPC", "1.0"),
    ("JSONRPC", "0.3"),
    ("HTTP+JSON", "1.0"),
    ("HTTP+JSON", "0.3"),
    ("GRPC", "1.0"),
    ("GRPC", "0.3"),
]
RUNS: list[str] = []  # the contexts the module ran in, in order


class CountIn(BaseModel):
    pause: float = 0.0


class CountOut(BaseModel):
    runs: int


class Count:
    input_schema = CountIn
    output_schema = CountOut
    description = "Count its runs (after an optional pause)"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        await asyncio.sleep(inputs.get("pause") or 0.0)
        RUNS.append(str(context.data.get("a2a.context_id")))
        return {"runs": len(RUNS)}


@dataclass
class Agent:
    url: str
    grpc_address: str


def _registry() -> Registry:
    registry = Registry()
    registry.register("demo.count", Count())
    return registry


@contextlib.contextmanager
def _serve(store: str, **settings: Any) -> Iterator[Agent]:
    port, grpc_port = free_port(), free_port()
    app, _ = A2AServerFactory(
        _registry(),
        environ={},
        port=port,
        grpc_port=grpc_port,
        task_store=store,
        api_keys=tuple(f"{key}={who}" for who, key in KEYS.items()),
        **settings,
    ).create()
    with threaded_server(app, port=port) as url:
        yield Agent(url, f"127.0.0.1:{grpc_port}")


@contextlib.contextmanager
def _store_url(kind: str, tmp: Path) -> Iterator[str]:
    if kind == "memory":
        yield "memory://"
    elif kind == "sqlite":
        yield f"sqlite:///{tmp / 'tasks.db'}"
    else:
        with pg_schema_url(agents=2) as url:
            yield url


@pytest.fixture(scope="module", params=["memory", "sqlite", "postgresql"])
def agent(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Agent]:
    with (
        _store_url(request.param, tmp_path_factory.mktemp("store")) as store,
        _serve(store) as running,
    ):
        yield running


@pytest.fixture
async def http(agent: Agent) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as client:
        yield client


def fresh() -> str:
    return "ctx-" + uuid.uuid4().hex[:16]


def _message(version: str, proto: bool, context_id: str | None, pause: float) -> dict[str, Any]:
    """A message in the JSON of *version* (0.3: JSON-RPC's, or proto JSON with *proto*)."""
    data = {"pause": pause}
    if version == "1.0":
        msg: dict[str, Any] = {"role": "ROLE_USER", "parts": [{"data": data}]}
    elif proto:
        msg = {"role": "ROLE_USER", "content": [{"data": {"data": data}}]}
    else:
        msg = {"kind": "message", "role": "user", "parts": [{"kind": "data", "data": data}]}
    msg |= {"messageId": uuid.uuid4().hex, "metadata": {"skillId": "demo.count"}}
    if context_id is not None:
        msg["contextId"] = context_id
    return msg


@dataclass
class Answer:
    ok: bool
    #: the refusal: its JSON-RPC code / HTTP status / gRPC status name, and its message
    code: Any = None
    message: str = ""
    context_id: str = ""


async def send_as(
    who: str,
    agent: Agent,
    binding: str,
    version: str,
    context_id: str | None,
    *,
    pause: float = 0.0,
    stream: bool = False,
) -> Answer:
    """*who* sends one message (no task id) on the cell, naming *context_id* (if any)."""
    key = KEYS[who]
    if binding == "GRPC":
        msg = _message(version, True, context_id, pause)
        if version == "1.0":
            request: Any = ParseDict({"message": msg}, pb.SendMessageRequest())
        else:
            request = ParseDict({"request": msg}, pb03.SendMessageRequest())
        async with stubs(agent.grpc_address) as (v1, v03):
            try:
                sent = await (v1 if version == "1.0" else v03).SendMessage(
                    request, metadata=(("x-api-key", key),), timeout=30
                )
            except grpc.aio.AioRpcError as failed:
                status = rich_status(failed)
                return Answer(False, status["code"].name, status["message"])
        task = sent.task
        assert task.status.state in (pb.TASK_STATE_COMPLETED, pb03.TASK_STATE_COMPLETED), sent
        return Answer(True, context_id=task.context_id)
    headers = {"X-API-Key": key, "A2A-Version": version}
    async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:
        if binding == "JSONRPC":
            method = {
                ("1.0", False): "SendMessage",
                ("1.0", True): "SendStreamingMessage",
                ("0.3", False): "message/send",
                ("0.3", True): "message/stream",
            }[version, stream]
            params = {"message": _message(version, False, context_id, pause)}
            call = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            answer = await http.post("/", json=call, headers=headers)
            assert answer.status_code == 200, answer.text
            # a stream refused before its first event is a plain JSON-RPC answer
            streamed = answer.headers["content-type"].startswith("text/event-stream")
            body = _last_sse(answer.text) if streamed else answer.json()
            if "error" in body:
                return Answer(False, body["error"]["code"], body["error"]["message"])
            result = body["result"]
        else:
            path = "/message:send" if version == "1.0" else "/v1/message:send"
            msg = _message(version, True, context_id, pause)
            answer = await http.post(path, json={"message": msg}, headers=headers)
            if answer.status_code != 200:
                error = answer.json().get("error", answer.json())
                return Answer(False, answer.status_code, str(error.get("message")))
            result = answer.json()
    task = result.get("task", result)
    return Answer(True, context_id=str(task["contextId"]))


def _last_sse(text: str) -> dict[str, Any]:
    datas = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    return dict(json.loads(datas[-1]))


INVALID = {"JSONRPC": -32602, "HTTP+JSON": 400, "GRPC": "INVALID_ARGUMENT"}


def assert_refused(answer: Answer, binding: str) -> None:
    assert not answer.ok, answer
    assert answer.code == INVALID[binding], answer
    assert "not available to this caller" in answer.message, answer
    assert "alice" not in answer.message and "bob" not in answer.message


async def contexts_of(http: httpx.AsyncClient, who: str, context_id: str) -> list[str]:
    """The ids of *who*'s tasks in *context_id* (ListTasks, JSON-RPC 1.0)."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"contextId": context_id}}
    headers = {"X-API-Key": KEYS[who], "A2A-Version": "1.0"}
    body = (await http.post("/", json=call, headers=headers)).json()
    return [t["id"] for t in body["result"].get("tasks", [])]


@pytest.mark.parametrize(("binding", "version"), CELLS)
async def test_bob_cannot_start_a_task_in_alices_context(
    agent: Agent, http: httpx.AsyncClient, binding: str, version: str
) -> None:
    context_id = fresh()
    first = await send_as("alice", agent, "JSONRPC", "1.0", context_id)
    assert first.ok and first.context_id == context_id
    runs = len(RUNS)

    refused = await send_as("bob", agent, binding, version, context_id)
    assert_refused(refused, binding)
    if binding == "JSONRPC":  # the streaming method too
        streamed = await send_as("bob", agent, binding, version, context_id, stream=True)
        assert_refused(streamed, binding)
    assert len(RUNS) == runs  # no module ran
    assert await contexts_of(http, "bob", context_id) == []  # nothing stored
    assert len(await contexts_of(http, "alice", context_id)) == 1

    # alice continues her own context on the cell; bob's fresh context and his messages
    # without one work as before
    assert (await send_as("alice", agent, binding, version, context_id)).ok
    assert len(await contexts_of(http, "alice", context_id)) == 2
    mine = fresh()
    assert (await send_as("bob", agent, binding, version, mine)).context_id == mine
    assert (await send_as("bob", agent, binding, version, mine)).ok
    assert (await send_as("bob", agent, binding, version, None)).ok
    # and now alice is the stranger in bob's context
    assert_refused(await send_as("alice", agent, binding, version, mine), binding)
    assert RUNS[-4:] == [context_id, mine, mine, RUNS[-1]]


async def test_a_race_for_a_fresh_context_has_one_winner(agent: Agent) -> None:
    """alice and bob open the same fresh context at once (the module takes a moment):
    exactly one of them gets it, whoever came first."""
    for _ in range(3):
        context_id = fresh()
        answers = await asyncio.gather(
            send_as("alice", agent, "JSONRPC", "1.0", context_id, pause=0.3),
            send_as("bob", agent, "GRPC", "1.0", context_id, pause=0.3),
        )
        assert sorted(a.ok for a in answers) == [False, True], answers
        assert RUNS.count(context_id) == 1


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_two_agents_on_one_database(kind: str, tmp_path: Path) -> None:
    """What one agent stored refuses bob at another agent on the same database."""
    with (
        _store_url(kind, tmp_path) as store,
        _serve(store, cluster=True) as one,
        _serve(store, cluster=True) as two,
    ):
        context_id = fresh()
        assert (await send_as("alice", one, "JSONRPC", "1.0", context_id)).ok
        assert_refused(await send_as("bob", two, "GRPC", "1.0", context_id), "GRPC")
        assert_refused(await send_as("bob", two, "HTTP+JSON", "1.0", context_id), "HTTP+JSON")
        assert (await send_as("alice", two, "HTTP+JSON", "0.3", context_id)).ok


async def test_the_memory_store_forgets_a_context_with_its_last_task() -> None:
    """Anonymous callers share one owner (the SDK's), so they share contexts; a context
    whose tasks all left the store (evicted, deleted) is free again."""
    store = BoundedMemoryTaskStore(max_capacity=1)
    guard = ContextGuard(store.others_in, store.owner_of)

    def call(who: str | None) -> ServerCallContext:
        return ServerCallContext(user=OwnerUser(who) if who else UnauthenticatedUser())

    def starting(context_id: str) -> pb.SendMessageRequest:
        return pb.SendMessageRequest(message=pb.Message(message_id="m", context_id=context_id))

    done = pb.TaskStatus(state=pb.TASK_STATE_COMPLETED)
    await store.save(pb.Task(id="t1", context_id="c1", status=done), call("alice"))
    for stranger in ("bob", None):
        with pytest.raises(InvalidParamsError):
            await guard.enter(starting("c1"), call(stranger))
    (await guard.enter(starting("c1"), call("alice")))()
    await store.save(pb.Task(id="t2", context_id="c2", status=done), call(None))
    (await guard.enter(starting("c2"), call(None)))()  # another anonymous caller
    with pytest.raises(InvalidParamsError):
        await guard.enter(starting("c2"), call("alice"))
    (await guard.enter(starting("c1"), call("bob")))()  # alice's t1 made room for t2
    leave = await guard.enter(starting("c3"), call("bob"))  # held while bob's request runs
    with pytest.raises(InvalidParamsError):
        await guard.enter(starting("c3"), call("alice"))
    leave()
    (await guard.enter(starting("c3"), call("alice")))()
