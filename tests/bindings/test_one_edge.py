"""One edge (issue 42): each policy's violating request, sent on JSON-RPC, REST and gRPC,
gets the same refusal class on each binding.

* shape limits (strings, values, depth, parts): ``-32602`` / 400 ``INVALID_ARGUMENT`` /
  ``INVALID_ARGUMENT``, naming the limit; a string over ``max_string_bytes`` was served
  on gRPC before;
* the version rule: ``-32009`` / 400 / ``FAILED_PRECONDITION``, reason
  ``VERSION_NOT_SUPPORTED``;
* the stream and unfinished-task quotas: ``-32091`` / 429 with ``Retry-After`` /
  ``RESOURCE_EXHAUSTED`` with reason ``QUOTA_EXCEEDED`` and a ``google.rpc.RetryInfo`` of
  the same seconds (gRPC had no retry hint, its stream refusal no reason);
* the agent's stream cap: 503 with ``Retry-After`` / ``UNAVAILABLE`` with a
  ``google.rpc.RetryInfo`` of the same seconds;
* a body that is not UTF-8 JSON (UTF-16 included, RFC 8259 §8.1): ``-32700`` / 400;
  gRPC bodies are protobuf, whose strings the runtime requires to be UTF-8;
* a string holding an unpaired surrogate escape: ``-32700`` / 400 in the same words (REST
  named protobuf's and Python's internals);
* a field the schema does not know: ignored (the SDK parses JSON with
  ``ignore_unknown_fields``; protobuf kept a gRPC message's, stored and answered back
  outside every shape limit);
* a body that does not parse (JSON cut short; a gRPC message corrupt, or nested deeper than
  protobuf decodes): ``-32700`` / 400 ``INVALID_ARGUMENT`` / ``INVALID_ARGUMENT``, reason
  ``INVALID_REQUEST``, naming no exception class (gRPC answered ``UNKNOWN``, naming
  protobuf's ``DecodeError``).

Authentication and roles (401/403 alike on the three) are in ``test_refusals.py``.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.grpc_status import status_from_call
from google.protobuf.json_format import ParseDict
from google.rpc import error_details_pb2

from tests._support import TLS
from tests.bindings._agent import GATES, Agent, serve_agent
from tests.bindings._grpc import rich_status, stubs

LIMITS = {
    "max_string_bytes": 2000,
    "max_json_values": 300,
    "max_json_depth": 8,
    "max_parts_per_message": 3,
    "max_streams_per_caller": 1,
}
V1 = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    with serve_agent(**LIMITS) as running:
        yield running


def _message(parts: list[dict[str, Any]], skill: str = "demo.echo", **meta: Any) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts,
            "metadata": {"skillId": skill, **meta}}  # fmt: skip


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"x": value}
    return value


VIOLATIONS = {
    "max_string_bytes": _message([{"text": "s" * 3000}]),
    "max_json_values": _message([{"text": "hi"}], bulk=list(range(400))),
    "max_json_depth": _message([{"text": "hi"}], deep=_nested(10)),
    "max_parts_per_message": _message([{"text": "a"}] * 4),
}


async def _three(agent: Agent, message: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """What JSON-RPC, REST and gRPC answer to SendMessage(*message*)."""
    async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:
        call = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        rpc = (await http.post("/", json=call, headers=headers)).json()
        rest = await http.post("/message:send", json={"message": message}, headers=headers)
    request = ParseDict({"message": message}, pb.SendMessageRequest())
    metadata = [("a2a-version", v) for k, v in headers.items() if k.lower() == "a2a-version"]
    async with stubs(agent.grpc_address, announce=False) as (v1, _v03):
        try:
            await v1.SendMessage(request, metadata=metadata, timeout=30)
            answered: dict[str, Any] = {"code": "served"}
        except grpc.aio.AioRpcError as failed:
            answered = rich_status(failed)
    details = rest.json()["error"].get("details") or [{}]
    return {
        "jsonrpc": (rpc["error"]["code"], rpc["error"]["message"]),
        "rest": (rest.status_code, rest.json()["error"]["status"], details[0].get("reason")),
        "grpc": (answered["code"], answered.get("reason"), answered.get("message")),
    }


@pytest.mark.parametrize("limit", sorted(VIOLATIONS))
async def test_a_shape_limit_refuses_alike_on_every_binding(agent: Agent, limit: str) -> None:
    seen = await _three(agent, VIOLATIONS[limit], V1)
    assert seen["jsonrpc"][0] == -32602
    assert str(LIMITS[limit]) in seen["jsonrpc"][1]
    assert seen["rest"][:2] == (400, "INVALID_ARGUMENT")
    assert seen["grpc"][0] == grpc.StatusCode.INVALID_ARGUMENT, seen  # main: strings served
    assert str(LIMITS[limit]) in seen["grpc"][2]


async def test_the_version_rule_refuses_alike_on_every_binding(agent: Agent) -> None:
    seen = await _three(agent, _message([{"text": "hi"}]), {})
    assert seen["jsonrpc"][0] == -32009
    assert seen["rest"] == (400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED")
    assert seen["grpc"][:2] == (grpc.StatusCode.FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED")
    assert all("A2A-Version: 1.0" in str(seen[b][-1]) for b in ("jsonrpc", "grpc"))


async def test_a_request_breaking_two_rules_gets_one_refusal_on_every_binding(
    agent: Agent,
) -> None:
    """The shape limits come before the version rule, as on HTTP (gRPC checked the version
    first: ``FAILED_PRECONDITION``)."""
    seen = await _three(agent, VIOLATIONS["max_string_bytes"], {})
    assert seen["jsonrpc"][0] == -32602
    assert seen["rest"][:2] == (400, "INVALID_ARGUMENT")
    assert seen["grpc"][0] == grpc.StatusCode.INVALID_ARGUMENT, seen


@contextlib.asynccontextmanager
async def _holding_a_stream(agent: Agent) -> AsyncIterator[None]:
    """One stream of this caller held open (the quota is 1)."""
    key = uuid.uuid4().hex
    body = {"message": _message([{"data": {"key": key}}], skill="demo.gate")}
    async with (
        httpx.AsyncClient(timeout=30, verify=TLS) as http,
        http.stream("POST", agent.url + "/message:stream", json=body, headers=V1) as held,
    ):
        assert held.status_code == 200
        await GATES.wait_started(key)
        try:
            yield
        finally:
            GATES.release(key)


async def _streams_beside_a_held_one(
    agent: Agent,
) -> tuple[httpx.Response, httpx.Response, grpc.aio.AioRpcError]:
    """While another caller holds a stream: a stream asked for on JSON-RPC, REST and gRPC,
    and how each was answered (gRPC's must be a refusal)."""
    body = {"message": _message([{"text": "hi"}], skill="demo.countdown")}
    call = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": body}
    async with _holding_a_stream(agent), httpx.AsyncClient(timeout=30, verify=TLS) as http:
        rpc = await http.post(agent.url + "/", json=call, headers=V1)
        rest = await http.post(agent.url + "/message:stream", json=body, headers=V1)
        async with stubs(agent.grpc_address) as (v1, _v03):
            stream = v1.SendStreamingMessage(ParseDict(body, pb.SendMessageRequest()))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stream.read()
    return rpc, rest, refused.value


async def test_the_stream_quota_refuses_alike_with_a_retry_hint(agent: Agent) -> None:
    rpc, rest, refused = await _streams_beside_a_held_one(agent)
    assert (rpc.status_code, rpc.json()["error"]["code"]) == (429, -32091)
    assert (rest.status_code, rest.json()["error"]["details"][0]["reason"]) == (
        429,
        "QUOTA_EXCEEDED",
    )
    assert rpc.headers["retry-after"] == rest.headers["retry-after"] == "1"
    seen = rich_status(refused)
    assert (seen["code"], seen.get("reason")) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "QUOTA_EXCEEDED",  # main: no reason, no retry hint
    )
    assert _retry_seconds(refused) == 1


def _retry_seconds(refused: grpc.aio.AioRpcError) -> int:
    status = status_from_call(refused)
    retry = error_details_pb2.RetryInfo()
    assert status is not None and any(d.Unpack(retry) for d in status.details)
    return retry.retry_delay.seconds


async def test_the_agents_stream_cap_refuses_alike_with_a_retry_hint() -> None:
    """The agent as a whole at its stream cap (one stream, held by another caller): each
    binding answers "unavailable, retry in 5 s" (one refusal, ``StreamLimiter.acquire``)."""
    with serve_agent(max_streams=1) as agent:
        rpc, rest, refused = await _streams_beside_a_held_one(agent)
    assert (rpc.status_code, rpc.json()["error"]["code"]) == (503, -32603)
    assert (rest.status_code, rest.json()["error"]["status"]) == (503, "UNAVAILABLE")
    assert rpc.headers["retry-after"] == rest.headers["retry-after"] == "5"
    assert refused.code() == grpc.StatusCode.UNAVAILABLE
    assert "Too many concurrent streams" in str(refused.details())
    assert _retry_seconds(refused) == 5


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
async def test_a_body_that_is_not_utf8_is_a_parse_error(agent: Agent, encoding: str) -> None:
    """RFC 8259 §8.1: JSON is UTF-8. A UTF-16/32 body is refused before it is parsed: its
    values are never counted against the shape limits, and a lone surrogate in its id
    does not reach the SDK (main: 240,000 values accepted, and HTTP 500)."""
    bulk = list(range(5000))  # far over max_json_values
    call = {"jsonrpc": "2.0", "id": "\ud800", "method": "SendMessage",
            "params": {"message": _message([{"text": "hi"}], bulk=bulk)}}  # fmt: skip
    raw = json.dumps(call).encode(encoding, "surrogatepass")
    headers = {**V1, "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:
        rpc = await http.post("/", content=raw, headers=headers)
        rest = await http.post("/message:send", content=raw, headers=headers)
    assert rpc.status_code == 200 and rpc.json()["error"]["code"] == -32700, rpc.text
    assert rpc.json()["id"] is None
    assert rest.status_code == 400, rest.text


LONE = "Parse error: a string holds an unpaired UTF-16 surrogate"


@pytest.mark.parametrize(
    ("where", "escaped"),
    [("a key", '{"\\ud800": 1}'), ("a Struct's value", '{"skillId": "\\ud800"}')],
)
async def test_a_lone_surrogate_is_refused_alike(agent: Agent, where: str, escaped: str) -> None:
    """An unpaired surrogate escape (``"\\ud800"`` is valid JSON, no UTF-8 text) in a
    message's metadata: ``-32700`` on JSON-RPC, 400 in the same words on REST, 1.0 and 0.3.
    REST answered protobuf's and Python's internals: ``SystemError: <method 'get' of
    'google._upb._message._ByNameMap' objects> returned a result with an exception set``,
    ``'utf-8' codec can't encode character '\\ud800' ... surrogates not allowed``."""
    one = {"message": _message([{"text": "hi"}])}
    one["message"]["metadata"] = "HERE"
    old = {"message": {"kind": "message", "messageId": "m", "role": "user",
                       "parts": [{"kind": "text", "text": "hi"}], "metadata": "HERE"}}  # fmt: skip
    v03 = {"A2A-Version": "0.3"}
    sent = [
        ("/", V1, {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": one}),
        ("/", v03, {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": old}),
        ("/message:send", V1, one),
        ("/message:stream", V1, one),
        ("/v1/message:send", v03, old),
        ("/tasks/t/pushNotificationConfigs", V1, "HERE"),
    ]
    async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:
        for path, version, body in sent:
            headers = {**version, "Content-Type": "application/json"}
            raw = json.dumps(body).replace('"HERE"', escaped).encode()
            answer = await http.post(path, content=raw, headers=headers)
            error = answer.json()["error"]
            said = (path, where, answer.status_code, error["message"])
            assert said == (path, where, 200 if path == "/" else 400, LONE), answer.text


async def test_the_task_quota_refuses_alike_with_a_retry_hint() -> None:
    """One unfinished task per caller: a second new task is refused on each binding with
    the same error and the same retry hint (gRPC: ``google.rpc.RetryInfo``, new)."""
    key = uuid.uuid4().hex
    parked = {"message": _message([{"data": {"key": key}}], skill="demo.gate"),
              "configuration": {"returnImmediately": True}}  # fmt: skip
    body = {"message": _message([{"text": "hi"}])}
    call = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": body}
    with serve_agent(max_unfinished_tasks_per_caller=1) as agent:
        try:
            async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:
                held = await http.post("/message:send", json=parked, headers=V1)
                assert held.status_code == 200, held.text
                await GATES.wait_started(key)
                rpc = await http.post("/", json=call, headers=V1)
                rest = await http.post("/message:send", json=body, headers=V1)
            async with stubs(agent.grpc_address) as (v1, _v03):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await v1.SendMessage(ParseDict(body, pb.SendMessageRequest()), timeout=30)
        finally:
            GATES.release(key)
    assert rpc.json()["error"]["code"] == -32091
    assert rpc.json()["error"]["data"][0]["metadata"]["retryAfter"] == "30"
    assert (rest.status_code, rest.headers["retry-after"]) == (429, "30")
    seen = rich_status(refused.value)
    assert (seen["code"], seen.get("reason")) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "QUOTA_EXCEEDED",
    )
    assert _retry_seconds(refused.value) == 30  # main: no retry hint on gRPC


async def _raw_grpc(agent: Agent, method: str, raw: bytes, version: str) -> dict[str, Any]:
    """What gRPC *method* answers to the request bytes *raw*."""
    async with grpc.aio.insecure_channel(agent.grpc_address) as channel:
        call = channel.unary_unary(method)
        try:
            await call(raw, metadata=[("a2a-version", version)], timeout=30)
        except grpc.aio.AioRpcError as failed:
            return rich_status(failed)
    return {"code": "served"}


async def test_a_body_that_does_not_parse_is_refused_alike(agent: Agent) -> None:
    headers = {**V1, "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:
        rpc = (await http.post("/", content=b'{"jsonrpc": ', headers=headers)).json()
        rest = await http.post("/message:send", content=b'{"message": {', headers=headers)
    assert rpc["error"]["code"] == -32700
    assert (rest.status_code, rest.json()["error"]["details"][0]["reason"]) == (
        400,
        "INVALID_REQUEST",
    )
    # 40 Structs deep: 120 protobuf levels, where protobuf's decoder stops at 100
    deep = ParseDict(
        {"message": _message([{"text": "hi"}], deep=_nested(40))}, pb.SendMessageRequest()
    )
    sent = {
        ("/lf.a2a.v1.A2AService/SendMessage", "1.0"): (b"\xff" * 4, deep.SerializeToString()),
        ("/a2a.v1.A2AService/SendMessage", "0.3"): (b"\xff" * 4,),
    }
    for (method, version), bodies in sent.items():
        for raw in bodies:
            seen = await _raw_grpc(agent, method, raw, version)
            assert seen["code"] == grpc.StatusCode.INVALID_ARGUMENT, seen  # main: UNKNOWN
            assert "class" not in seen["message"] and "DecodeError" not in seen["message"]
            assert version == "0.3" or seen["reason"] == "INVALID_REQUEST"


def _tagged(number: int, payload: bytes) -> bytes:
    """Field *number* of a protobuf message, length-delimited, holding *payload*."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


async def test_a_field_the_schema_does_not_know_is_ignored_alike(agent: Agent) -> None:
    message = _message([{"text": "hi"}])
    async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:
        rest = await http.post("/message:send", json={"message": {**message, "x": "u"}}, headers=V1)
    assert rest.status_code == 200 and '"x"' not in rest.text
    # 100 kB in field 999 of the message, which no schema names (max_string_bytes: 2000)
    known = ParseDict({"message": message}, pb.SendMessageRequest()).message.SerializeToString()
    raw = _tagged(2, known + _tagged(999, b"u" * 100_000))  # SendMessageRequest.message
    async with grpc.aio.insecure_channel(agent.grpc_address) as channel:
        send = channel.unary_unary("/lf.a2a.v1.A2AService/SendMessage")
        sent = pb.SendMessageResponse.FromString(await send(raw, metadata=[("a2a-version", "1.0")]))
        get = channel.unary_unary("/lf.a2a.v1.A2AService/GetTask")
        asked = pb.GetTaskRequest(id=sent.task.id, history_length=5).SerializeToString()
        stored = pb.Task.FromString(await get(asked, metadata=[("a2a-version", "1.0")]))
    assert [m.parts[0].text for m in stored.history] == ["hi"]
    assert sent.ByteSize() < 10_000 and stored.ByteSize() < 10_000  # main: 100 kB more each
