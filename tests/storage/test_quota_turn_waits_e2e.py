"""A new task meeting another count of its caller's rows, on every binding (cluster mode,
PostgreSQL, a real agent): told to retry shortly, or "quota exceeded" only at the quota.

The agent runs with ``max_unfinished_tasks_per_caller`` 2; its caller (anonymous here:
``ip:127.0.0.1``, on HTTP and gRPC alike) holds a task counted past the quota, as a rename's
retry leaves one (``_slot_rows.take_past``), so its takes count its rows one at a time, and
the test holds that count (as another replica's take does). With room for one more task,
every new task of every binding and version (streamed too) was answered "quota exceeded,
retry in 30 s" (-32091, HTTP 429, gRPC ``RESOURCE_EXHAUSTED``); now it is told to retry in a
second (-32092, HTTP 503, gRPC ``UNAVAILABLE``, ``Retry-After``/``RetryInfo`` 1), and served
once the count ends. At the quota (two held) it is still "quota exceeded" with its 30 s. A
new stream at ``max_streams_per_caller`` (the stream slots) gets the same, before it opens.
"""

from __future__ import annotations

import contextlib
import functools
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc as grpc03
from a2a.types import a2a_pb2_grpc as grpc10
from apcore import Registry
from google.rpc import error_details_pb2, status_pb2

from apcore_a2a import A2AServerFactory
from apcore_a2a.storage.quota_slots import TASK_SCOPE
from tests._sdk import request

from .._modules import Add
from .._postgres import PG_HOST, PG_PORT, PG_USER, pg_database_url
from .._support import TLS, free_port, running_server
from .test_lowered_quota import counting

asyncpg = pytest.importorskip("asyncpg")
pytestmark = pytest.mark.postgres

CALLER = "ip:127.0.0.1"
QUOTA = 2
ADD = {"a": 1, "b": 2}
#: (JSON-RPC code, HTTP status, gRPC status, seconds to wait) of each answer
BUSY = (-32092, 503, "UNAVAILABLE", 1)
FULL = (-32091, 429, "RESOURCE_EXHAUSTED", 30)
#: one answer: (JSON-RPC code or None, HTTP or gRPC status, seconds to wait or None)
Answer = tuple[int | None, int | str, int | None]


def _message(legacy: bool) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "user" if legacy else "ROLE_USER",
        "parts": [{"kind": "data", "data": ADD} if legacy else {"data": ADD}],
        "metadata": {"skillId": "demo.add"},
    }
    if legacy:
        message["kind"] = "message"
    return message


async def _jsonrpc(http: httpx.AsyncClient, version: str, stream: bool = False) -> Answer:
    methods = (
        ("message/send", "message/stream")
        if version == "0.3"
        else ("SendMessage", "SendStreamingMessage")
    )
    params = {"message": _message(version == "0.3")}
    body = {"jsonrpc": "2.0", "id": 1, "method": methods[stream], "params": params}
    sent = await http.post("/", json=body, headers={"A2A-Version": version})
    # a stream refused before its first event: one JSON answer (1.0) or one SSE event (0.3)
    answer = json.loads(sent.text.removeprefix("data:").split("\n\n")[0])
    if "error" not in answer:
        return None, 200, None
    error = answer["error"]
    data = error.get("data")
    # 1.0: a list of google.rpc details; 0.3: an object of our own
    infos = data if isinstance(data, list) else [data or {}]
    hints = [info.get("metadata", info).get("retryAfter") for info in infos]
    seconds = next((int(hint) for hint in hints if hint is not None), None)
    return error["code"], 200, seconds


async def _rest(http: httpx.AsyncClient, version: str) -> Answer:
    message = _message(False)
    if version == "0.3":
        message["content"] = [{"data": {"data": ADD}}]
        del message["parts"]
    path = "/v1/message:send" if version == "0.3" else "/message:send"
    sent = await http.post(path, json={"message": message}, headers={"A2A-Version": version})
    retry = sent.headers.get("retry-after")
    return None, sent.status_code, None if retry is None else int(retry)


def _retry_info(error: grpc.aio.AioRpcError) -> int | None:
    """The seconds of the ``google.rpc.RetryInfo`` in *error*'s details, if any."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                delay = error_details_pb2.RetryInfo()
                if detail.Unpack(delay):
                    return int(delay.retry_delay.seconds)
    return None


async def _grpc(address: str, version: str) -> Answer:
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            if version == "0.3":
                sent = pb03.SendMessageRequest(
                    request=pb03.Message(message_id=uuid.uuid4().hex, role=pb03.ROLE_USER)
                )
                sent.request.content.add().data.data.update(ADD)
                sent.request.metadata.update({"skillId": "demo.add"})
                await grpc03.A2AServiceStub(channel).SendMessage(sent, timeout=30)
            else:
                stub = grpc10.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
                sent10 = request("demo.add", ADD)
                await stub.SendMessage(sent10, metadata=(("a2a-version", "1.0"),), timeout=30)
        except grpc.aio.AioRpcError as error:
            return None, error.code().name, _retry_info(error)
    return None, "OK", None


async def _answers(base: str, address: str) -> dict[str, Answer]:
    calls: dict[str, Callable[[], Awaitable[Answer]]] = {}
    async with httpx.AsyncClient(base_url=base, timeout=60, verify=TLS) as http:
        for version in ("1.0", "0.3"):
            calls[f"jsonrpc-{version}"] = functools.partial(_jsonrpc, http, version)
            calls[f"stream-{version}"] = functools.partial(_jsonrpc, http, version, True)
            calls[f"rest-{version}"] = functools.partial(_rest, http, version)
            calls[f"grpc-{version}"] = functools.partial(_grpc, address, version)
        return {name: await call() for name, call in calls.items()}


def _expected(
    code: int, http: int, status: str, seconds: int, *, streams: bool = False
) -> dict[str, Answer]:
    """The answers of :func:`_answers` (of :func:`_stream_answers` with *streams*: each
    refused before it opens, its JSON-RPC form with the HTTP status too) on every binding."""
    expected: dict[str, Answer] = {}
    for version in ("1.0", "0.3"):
        if streams:
            expected[f"jsonrpc-{version}"] = (code, http, seconds)
        else:
            expected[f"jsonrpc-{version}"] = expected[f"stream-{version}"] = (code, 200, seconds)
        expected[f"rest-{version}"] = (None, http, seconds)
        expected[f"grpc-{version}"] = (None, status, seconds)
    return expected


@contextlib.asynccontextmanager
async def _agent(environ: dict[str, str]) -> AsyncIterator[tuple[str, str, str, str, Any]]:
    """A cluster agent on a database of its own, gRPC too, with *environ*: (its URL, its
    gRPC address, the store URL, the quota slots' table, a connection to the database).
    Its own database: a count of :data:`CALLER`'s rows also takes the earlier releases'
    key, one for the whole database (``_slot_rows._EARLIER_KEY``), and the counts this
    file holds would hold up the takes of other test processes' agents, whose caller is
    the same ``ip:127.0.0.1``."""
    registry = Registry()
    registry.register("demo.add", Add())
    grpc_port = free_port()
    async with pg_database_url(agents=2) as url:
        table = "apcore_a2a_quota_slots"
        database = url.rsplit("/", 1)[1].split("?")[0]
        app, _ = A2AServerFactory(
            registry, environ=environ, task_store=url, grpc_port=grpc_port, cluster=True
        ).create()
        async with running_server(app) as base:
            db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=database)
            try:
                yield base, f"127.0.0.1:{grpc_port}", url, table, db
            finally:
                await db.close()


async def test_a_new_task_meeting_a_count_is_told_to_retry_shortly_on_every_binding() -> None:
    environ = {"A2A_MAX_UNFINISHED_TASKS_PER_CALLER": str(QUOTA)}
    async with _agent(environ) as (base, address, url, table, db):
        past = f"INSERT INTO {table} VALUES ($1, $2, $3, $4, NULL)"
        await db.execute(past, TASK_SCOPE, CALLER, 4, "kept-past-its-quota")
        async with counting(url, CALLER, QUOTA):
            room = await _answers(base, address)
        assert room == _expected(*BUSY)  # was: FULL's on every binding
        await db.execute(past, TASK_SCOPE, CALLER, 5, "another-past-its-quota")
        async with counting(url, CALLER, QUOTA):
            full = await _answers(base, address)
        assert full == _expected(*FULL)
        await db.execute(f"DELETE FROM {table} WHERE slot = 5")
        async with httpx.AsyncClient(base_url=base, timeout=60, verify=TLS) as http:
            assert await _jsonrpc(http, "1.0") == (None, 200, None)  # served


async def _refused_stream(http: httpx.AsyncClient, path: str, body: Any, version: str) -> Answer:
    """A stream refused before it opens: (JSON-RPC code, HTTP status, ``Retry-After``)."""
    sent = await http.post(path, json=body, headers={"A2A-Version": version})
    code = sent.json()["error"]["code"] if path == "/" else None
    retry = sent.headers.get("retry-after")
    return code, sent.status_code, None if retry is None else int(retry)


async def _grpc_stream(address: str, version: str) -> Answer:
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            if version == "0.3":
                sent = pb03.SendMessageRequest(
                    request=pb03.Message(message_id=uuid.uuid4().hex, role=pb03.ROLE_USER)
                )
                sent.request.content.add().data.data.update(ADD)
                sent.request.metadata.update({"skillId": "demo.add"})
                call = grpc03.A2AServiceStub(channel).SendStreamingMessage(sent, timeout=30)
            else:
                stub = grpc10.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
                call = stub.SendStreamingMessage(
                    request("demo.add", ADD), metadata=(("a2a-version", "1.0"),), timeout=30
                )
            async for _ in call:
                pass
        except grpc.aio.AioRpcError as error:
            return None, error.code().name, _retry_info(error)
    return None, "OK", None


async def _stream_answers(base: str, address: str) -> dict[str, Answer]:
    answers: dict[str, Answer] = {}
    async with httpx.AsyncClient(base_url=base, timeout=60, verify=TLS) as http:
        for version in ("1.0", "0.3"):
            legacy = version == "0.3"
            method = "message/stream" if legacy else "SendStreamingMessage"
            body = {"jsonrpc": "2.0", "id": 1, "method": method}
            body["params"] = {"message": _message(legacy)}
            answers[f"jsonrpc-{version}"] = await _refused_stream(http, "/", body, version)
            message = _message(False)
            if legacy:
                message["content"] = [{"data": {"data": ADD}}]
                del message["parts"]
            path = "/v1/message:stream" if legacy else "/message:stream"
            rest = await _refused_stream(http, path, {"message": message}, version)
            answers[f"rest-{version}"] = rest
            answers[f"grpc-{version}"] = await _grpc_stream(address, version)
    return answers


async def test_a_new_stream_meeting_a_count_is_told_to_retry_shortly() -> None:
    """The same with ``max_streams_per_caller`` 2 and a stream slot past it: every new
    stream is refused before it opens, 503 / -32092 / ``UNAVAILABLE``, retry in 1 s (was:
    429 / -32091 / ``RESOURCE_EXHAUSTED``, "Stream quota exceeded"); at the quota, that."""
    environ = {"A2A_MAX_STREAMS_PER_CALLER": str(QUOTA)}
    async with _agent(environ) as (base, address, url, table, db):
        past = f"INSERT INTO {table} VALUES ('stream', $1, $2, $3, NULL)"
        await db.execute(past, CALLER, 4, "kept-past-its-quota")
        async with counting(url, CALLER, QUOTA, "stream"):
            room = await _stream_answers(base, address)
        assert room == _expected(*BUSY, streams=True)
        await db.execute(past, CALLER, 5, "another-past-its-quota")
        async with counting(url, CALLER, QUOTA, "stream"):
            full = await _stream_answers(base, address)
        assert full == _expected(*FULL[:3], 1, streams=True)  # a stream's retry: 1 s
