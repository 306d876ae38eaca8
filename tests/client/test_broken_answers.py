"""A broken or hostile agent's answers that are well-formed HTTP but not what A2A says.

Each agent here is a real server on 127.0.0.1 answering, on one route, what no honest
agent would: a JSON-RPC answer of nothing (or of both a result and an error), an
``event: error`` frame, a push status that is no document, a key set that is no key
set, a send result that is neither a task nor a message. The client raises the typed
error docs/client.md promises (*Errors*, *Signed cards*), and the CLI says it in one line
with its documented exit code.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest

from apcore_a2a.client import (
    A2AAuthenticationError,
    A2AClient,
    A2AConnectionError,
    A2AServerError,
    CardVerificationError,
    InvalidAgentResponseError,
    TaskNotFoundError,
)
from apcore_a2a.client.client import PUSH_STATUS_EXTENSION
from tests._support import cli, running_server
from tests.client._stub_agent import (
    CARD_V10,
    NOT_FOUND,
    TASK,
    TASK_03,
    Reply,
    StubAgent,
    card_for,
    json_reply,
    sse_reply,
)

# -- 1. a JSON-RPC answer has exactly one of result and error (JSON-RPC 2.0, section 5) --

NEITHER = {"jsonrpc": "2.0", "id": 1}
BOTH = {"jsonrpc": "2.0", "id": 1, "result": {"task": TASK}, "error": {"code": -32001}}
BOTH_03 = {"jsonrpc": "2.0", "id": 1, "result": TASK_03, "error": {"code": -32001}}


CALLS = {
    "send_message": lambda c: c.send_message("hi"),
    "get_task": lambda c: c.get_task("t-1"),
    "cancel_task": lambda c: c.cancel_task("t-1"),
    "delete_push_config": lambda c: c.delete_push_config("t-1", "p-1"),
    "stream_message": lambda c: _drain(c.stream_message("hi")),
}
CASES = [(answer, call) for answer in ("neither", "both") for call in CALLS]


@pytest.mark.parametrize("version", ["1.0", "0.3"])
@pytest.mark.parametrize(
    ("answer", "call"), [c for c in CASES if c != ("neither", "delete_push_config")]
)
async def test_a_jsonrpc_answer_of_nothing_or_of_both_is_an_invalid_response(
    version: str, answer: str, call: str
) -> None:
    """Before: an A2A 0.3 stream event of nothing was skipped (the stream ended empty,
    as if the agent had sent no event); an answer of both was its error."""
    body = NEITHER if answer == "neither" else BOTH_03 if version == "0.3" else BOTH
    stream = call == "stream_message"
    reply = sse_reply(f"data: {json.dumps(body)}\n\n") if stream else json_reply(body)
    stub = StubAgent(rpc=lambda _b: reply, card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol=version) as client:
        with pytest.raises(InvalidAgentResponseError, match=f"has {answer} 'result'"):
            await CALLS[call](client)


@pytest.mark.parametrize(
    ("version", "body", "expected"),
    [
        # a null member is an unset one: the other is what the agent said
        ("1.0", {"jsonrpc": "2.0", "id": 1, "result": None, "error": {"code": -32001}}, "error"),
        ("1.0", {"jsonrpc": "2.0", "id": 1, "result": TASK, "error": None}, "task"),
        ("1.0", {"jsonrpc": "2.0", "id": 1, "result": None}, "nothing"),
        # a2a-sdk 1.3's own 0.3 server leaves a delete's null result out
        ("0.3", NEITHER, "nothing"),
    ],
)
async def test_a_null_member_beside_the_other_is_read_as_absent(
    version: str, body: dict[str, Any], expected: str
) -> None:
    stub = StubAgent(rpc=lambda _b: json_reply(body), card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol=version) as client:
        if expected == "error":
            with pytest.raises(TaskNotFoundError):
                await client.get_task("t-1")
        elif expected == "task":
            assert (await client.get_task("t-1"))["id"] == "t-1"
        else:
            assert await client.delete_push_config("t-1", "p-1") is None


async def _drain(events: Any) -> list[dict[str, Any]]:
    return [event async for event in events]


# -- 2. a REST ``event: error`` frame -----------------------------------------------


@pytest.mark.parametrize(
    ("frame", "expected", "said"),
    [
        # A2A 1.0 (a2a-sdk 1.3, apcore-a2a): the google.rpc.Status in an ``error`` member
        ({"error": NOT_FOUND}, TaskNotFoundError, "no such task"),
        (NOT_FOUND, TaskNotFoundError, "no such task"),  # bare
        ({"error": {"code": 500, "message": "boom"}}, A2AServerError, "boom"),
        ("boom", A2AServerError, "agent sent an error event"),
    ],
    ids=["wrapped", "bare", "no-reason", "not-an-object"],
)
async def test_a_rest_error_event_is_the_typed_error_it_names(
    frame: Any, expected: type[Exception], said: str
) -> None:
    """Before: the 1.0 frame, wrapped as a2a-sdk and apcore-a2a send it, was an
    ``A2AServerError`` quoting the frame, not the ``TaskNotFoundError`` it names."""
    working = {"statusUpdate": {"taskId": "t-1", "contextId": "c-1", "status": {"state": 2}}}
    reply = sse_reply(
        f"data: {json.dumps(working)}\n\n", f"event: error\ndata: {json.dumps(frame)}\n\n"
    )
    stub = StubAgent(rpc=lambda _b: reply)
    async with running_server(stub) as url:
        stub.card = card_for(url, "HTTP+JSON", "1.0")
        async with A2AClient(url) as client:
            events = client.stream_message("hi")
            assert (await anext(events))["status"]["state"] == "working"
            with pytest.raises(expected, match=said):
                await anext(events)


# -- 3. push status ------------------------------------------------------------------


class _Answering:
    """A stub agent whose *path* answers *answer* (the card and A2A calls: the stub's)."""

    def __init__(self, path: str, answer: Reply, stub: StubAgent | None = None) -> None:
        self.path, self.answer, self.stub = path, answer, stub or StubAgent()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.path):
            await self.stub(scope, receive, send)
            return
        status, headers, chunks = self.answer
        raw = [(k.encode(), v.encode()) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": b"".join(chunks)})


def _push_status_agent(answer: Reply) -> _Answering:
    """An agent whose card declares the push status route, which answers *answer*."""
    agent = _Answering("/push/status/", answer)
    agent.stub.card["capabilities"] = {"extensions": [{"uri": PUSH_STATUS_EXTENSION}]}
    return agent


BROKEN_GZIP = (200, {"content-type": "application/json", "content-encoding": "gzip"}, [b"{}"])
#: a push status document, but named HTML (before: read as JSON, the header searched for it)
HTML_DOCUMENT = (
    200,
    {"content-type": "text/html; note=application/json"},
    [json.dumps({"taskId": "t-1", "configs": []}).encode()],
)


@pytest.mark.parametrize(
    ("answer", "expected", "said"),
    [
        (BROKEN_GZIP, InvalidAgentResponseError, "cannot be decoded"),
        (json_reply({"error": NOT_FOUND}, 404), TaskNotFoundError, "no such task"),
        (json_reply({"error": {"message": "no key"}}, 401), A2AAuthenticationError, "no key"),
        ((502, {"content-type": "text/plain"}, [b"bad gateway"]), A2AConnectionError, "502"),
        (json_reply([{"id": "p-1"}]), InvalidAgentResponseError, "no.* push status document"),
        (json_reply({"configs": "p-1"}), InvalidAgentResponseError, "push status document"),
        ((200, {}, [b"not json"]), InvalidAgentResponseError, "push status document"),
        (HTML_DOCUMENT, InvalidAgentResponseError, "push status document"),
    ],
    ids=[
        "undecodable",
        "not-found",
        "refused",
        "bad-gateway",
        "a-list",
        "configs",
        "not-json",
        "document-as-html",
    ],
)
async def test_a_broken_push_status_answer_is_a_typed_error(
    answer: Reply, expected: type[Exception], said: str
) -> None:
    """Before: a body not in its content encoding was an ``A2AConnectionError`` ("cannot
    reach"), though the agent was reached and answered."""
    async with running_server(_push_status_agent(answer)) as url, A2AClient(url) as client:
        with pytest.raises(expected, match=said) as raised:
            await client.push_status("t-1")
    assert type(raised.value) is expected


# -- 4. the agent's key set (``verify_card``) ----------------------------------------

#: a signature naming kid "k-1": the client fetches the key set to check it
SIGNATURE = {
    "protected": base64.urlsafe_b64encode(b'{"alg":"ES256","kid":"k-1"}').decode().rstrip("="),
    "signature": "c2ln",
}


def _jwks_agent(answer: Reply) -> _Answering:
    """An agent with a signed card whose key set route answers *answer*."""
    stub = StubAgent(card=CARD_V10 | {"signatures": [SIGNATURE]})
    return _Answering("/.well-known/jwks.json", answer, stub)


TOO_LARGE = json.dumps({"keys": [], "pad": "x" * 600_000}).encode()


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (json_reply({"error": "no"}, 404), "answers HTTP 404"),
        ((200, {"content-type": "application/json"}, [TOO_LARGE]), "is larger than 524288"),
        (
            (200, {"content-encoding": "gzip"}, [gzip.compress(TOO_LARGE)]),
            "is larger than 524288",
        ),
        (json_reply([{"kty": "EC"}]), "is not a JWKS"),
        ((200, {}, [b"<html>"]), "is not a JWKS"),
        (BROKEN_GZIP, "cannot be decoded"),
    ],
    ids=["404", "too-large", "gzip-too-large", "a-list", "not-json", "undecodable"],
)
async def test_a_key_set_that_is_none_leaves_the_card_unverified(answer: Reply, said: str) -> None:
    """Before: a key set not in its content encoding was an ``A2AConnectionError``
    ("cannot fetch"), every other unusable key set ``CardVerificationError(no_keys)``."""
    async with (
        running_server(_jwks_agent(answer)) as url,
        A2AClient(url, verify_card=True) as client,
    ):
        with pytest.raises(CardVerificationError, match=said) as raised:
            await client.discover()
    assert raised.value.reason == "no_keys"


@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_a_key_set_redirect_is_an_answer_without_keys_not_a_request_elsewhere(
    status: int,
) -> None:
    """The agent chooses what its key set URL answers: a redirect (to the cloud metadata
    service, to a port on the client's own host) is not followed; here its target is a
    local server standing for such a service, which must be asked nothing."""
    asked: list[str] = []
    elsewhere = _Answering("/", json_reply({"keys": []}))  # the stub answers its lifespan

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            asked.append(scope["path"])
        await elsewhere(scope, receive, send)

    async with running_server(recording) as target:
        answer = (status, {"location": target + "/latest/meta-data/"}, [b""])
        async with (
            running_server(_jwks_agent(answer)) as url,
            A2AClient(url, verify_card=True) as client,
        ):
            with pytest.raises(CardVerificationError, match=f"answers HTTP {status}") as raised:
                await client.discover()
    assert raised.value.reason == "no_keys"
    assert asked == []


# -- 6. a send result that is neither a task nor a message ---------------------------


@pytest.mark.parametrize(
    ("version", "result", "said"),
    [
        ("1.0", {}, "with nothing"),
        ("1.0", {"statusUpdate": {"taskId": "t-1", "status": {"state": 2}}}, "with nothing"),
        ("0.3", {"kind": "status-update", "taskId": "t-1", "status": {"state": "working"}}, ""),
        ("0.3", {"kind": "artifact-update", "taskId": "t-1", "artifact": {"parts": []}}, ""),
    ],
)
async def test_a_send_result_that_is_no_task_nor_message_is_an_invalid_response(
    version: str, result: dict[str, Any], said: str
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "result": result}
    stub = StubAgent(rpc=lambda _b: json_reply(body), card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol=version) as client:
        with pytest.raises(InvalidAgentResponseError, match=f"SendMessage {said}") as raised:
            await client.send_message("hi")
    assert "not a task or a message" in str(raised.value)


async def test_a_result_the_sdk_cannot_read_is_an_invalid_response_in_one_line() -> None:
    """a2a-sdk's 0.3 transports refuse a ``null`` task with a pydantic ``ValueError`` of
    several lines: it is an ``InvalidAgentResponseError`` whose message is one."""
    stub = StubAgent(rpc=lambda _b: json_reply({"jsonrpc": "2.0", "id": 1, "result": None}))
    async with running_server(stub) as url, A2AClient(url, protocol="0.3") as client:
        with pytest.raises(InvalidAgentResponseError, match="invalid GetTask result") as raised:
            await client.get_task("t-1")
    assert "\n" not in str(raised.value)


# -- the CLI against the same answers ------------------------------------------------


ONE_CONFIG = {"jsonrpc": "2.0", "id": 1, "result": {"configs": [{"id": "p-1", "url": "x"}]}}
ERROR_EVENT = f"event: error\ndata: {json.dumps({'error': NOT_FOUND})}\n\n"


def _cli_agent(case: str) -> _Answering:
    """The broken agent of *case* (its card still to name its URL, but for ``jwks``)."""
    if case == "push-status":
        agent = _push_status_agent(BROKEN_GZIP)
        agent.stub.rpc = lambda _b: json_reply(ONE_CONFIG)  # push list: one config
        return agent
    if case == "jwks":
        return _jwks_agent(BROKEN_GZIP)
    answers = {
        "neither": json_reply(NEITHER),
        "both": json_reply(BOTH),
        "error-event": sse_reply(ERROR_EVENT),
        "null-0.3": json_reply({"jsonrpc": "2.0", "id": 1, "result": None}),
    }
    return _Answering("/no-such-route", answers[case], StubAgent(rpc=lambda _b: answers[case]))


#: case: the command ({url}: the agent's), its exit code, the start of its one line
CLI_CASES = {
    "neither": (
        ("task", "get", "{url}", "t-1"),
        1,
        "InvalidAgentResponseError (-32006): agent reply has neither",
    ),
    "both": (
        ("call", "{url}", "--text", "hi"),
        1,
        "InvalidAgentResponseError (-32006): agent reply has both",
    ),
    "error-event": (
        ("call", "{url}", "--stream", "--text", "hi"),
        1,
        "TaskNotFoundError (-32001): no such task",
    ),
    "push-status": (
        ("push", "list", "{url}", "t-1"),
        1,
        "InvalidAgentResponseError (-32006): http://127.0.0.1:",
    ),
    "jwks": (
        ("card", "{url}", "--verify"),
        4,
        "CardVerificationError (no_keys): the key set at",
    ),
    "null-0.3": (
        ("task", "get", "{url}", "t-1"),
        1,
        "InvalidAgentResponseError (-32006): agent returned an invalid GetTask result",
    ),
}


@pytest.mark.parametrize("case", CLI_CASES)
async def test_the_cli_says_what_is_broken_in_one_line(case: str) -> None:
    command, code, said = CLI_CASES[case]
    agent = _cli_agent(case)
    async with running_server(agent) as url:
        if case != "jwks":
            binding = "HTTP+JSON" if case == "error-event" else "JSONRPC"
            card = card_for(url, binding, "0.3" if case == "null-0.3" else "1.0")
            agent.stub.card = card | {"capabilities": agent.stub.card["capabilities"]}
        exit_code, _out, err = await cli(*(url if word == "{url}" else word for word in command))
    assert exit_code == code, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: {said}"), err
