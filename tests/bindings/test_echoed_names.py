"""A refusal echoes the caller's value, slashes and all, while our own file paths in an
error's text still never reach the wire (``streams/scrub.py``, ``adapters/errors.sanitize``).

The scrubber took every run of two slash-separated words for a server path: a 0.3 gRPC
name ``tasks/t/pushNotificationConfigs/c`` came back as ``'tasks<path>'``. Then it still
hid a caller's own rooted value (a message continuing task ``/v1/typo`` was answered
``Task <path>``, its words after the value swallowed too), and showed a relative path that
names no Python file (``data/tasks.db``, ``.venv/lib/...``). A path the caller sent comes
back as sent; the agent's own, rooted or relative, never.
"""

from __future__ import annotations

from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.types import SendMessageRequest, a2a_pb2
from apcore import Executor, Registry
from apcore.errors import InvalidInputError
from google.protobuf.json_format import ParseDict

from apcore_a2a import A2AServerFactory
from tests._sdk import make_client, request
from tests._support import TLS, free_port, running_server
from tests.bindings._grpc import stubs

#: our paths, absolute and relative to the package, as an exception's text may carry them
LEAK = "bad input near /srv/app/secret/config.py line 3 (apcore_a2a/storage/_sql_backend.py)"
#: a database file relative and rooted, a venv, a Windows path: the rest of the text
MORE = (
    "; db data/tasks.db or apcore_a2a/storage/x.sqlite; lib .venv/lib/python3.11/site-packages/"
    "a2a/server; C:\\Users\\svc\\app\\mod.py; ~/agent/run/state"
)
#: what of those paths must not reach the wire
LEAKED = ("/srv", "secret", "config.py", "_sql_backend", "storage", "tasks.db", "sqlite",
          "venv", "site-packages", "Users", "svc", "mod.py", "agent/run")  # fmt: skip
BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]


class Leaky:
    description = "Refuse its input, naming where"
    # A message reply: its refusal is the call's error (a task skill's fails its task).
    metadata = {"a2a": {"reply": "message"}}

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        raise InvalidInputError(LEAK + MORE)


def _agent() -> tuple[Any, int, int]:
    registry = Registry()
    registry.register("t.leaky", Leaky())
    port, grpc_port = free_port(), free_port()
    app, _ = A2AServerFactory(
        Executor(registry), environ={}, port=port, grpc_port=grpc_port
    ).create()
    return app, port, grpc_port


async def test_a_03_grpc_refusal_echoes_the_callers_name_whole() -> None:
    app, port, grpc_port = _agent()
    name = "tasks/t/pushNotificationConfigs/c"
    async with running_server(app, port=port), stubs(f"127.0.0.1:{grpc_port}") as (_, v03):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await v03.CancelTask(pb03.CancelTaskRequest(name=name))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == (
        f"InvalidParamsError: name must be tasks/{{taskId}}, not '{name}'"
    )


@pytest.mark.parametrize("binding", BINDINGS)
async def test_our_paths_in_an_errors_text_never_reach_the_wire(binding: str) -> None:
    app, port, _ = _agent()
    async with running_server(app, port=port):
        client = await make_client(f"http://127.0.0.1:{port}", binding, "1.0")
        try:
            with pytest.raises(Exception) as refused:
                async for _ in client.send_message(request("t.leaky", {})):
                    pass
        finally:
            await client.close()
    text = f"{refused.value} {refused.value.__cause__}"
    assert "bad input near <path>" in text, text
    assert "db <path> or <path>; lib <path>; <path>; <path>" in text, text
    for leak in LEAKED:
        assert leak not in text, text


async def _refusal(url: str, binding: str, sent: SendMessageRequest) -> str:
    """The text of the error *sent* is answered with over *binding* (1.0, the SDK's client)."""
    client = await make_client(url, binding, "1.0")
    try:
        with pytest.raises(Exception) as refused:
            async for _ in client.send_message(sent):
                pass
    finally:
        await client.close()
    return f"{refused.value} {refused.value.__cause__}"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_callers_own_rooted_value_comes_back_as_sent(binding: str) -> None:
    app, port, _ = _agent()
    url = f"http://127.0.0.1:{port}"
    async with running_server(app, port=port):
        unknown_task = await _refusal(url, binding, request("t.leaky", {}, task_id="/v1/typo"))
        unknown_skill = await _refusal(url, binding, request("/srv/app/typo.py", {}))
    assert "Task /v1/typo not found" in unknown_task, unknown_task
    assert "Skill not found: /srv/app/typo.py" in unknown_skill, unknown_skill
    assert "<path>" not in unknown_task + unknown_skill


async def test_unknown_paths_and_methods_are_typed_errors_on_every_binding() -> None:
    app, port, grpc_port = _agent()
    v1 = {"A2A-Version": "1.0"}
    async with (
        running_server(app, port=port),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", verify=TLS) as http,
    ):
        rest = await http.get("/v1/typo/x.db", headers=v1)
        body = {"jsonrpc": "2.0", "id": 1, "method": "/v1/typo/x.db", "params": {}}
        rpc = await http.post("/", json=body, headers=v1)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            typo = channel.unary_unary("/a2a.v1.A2AService/Typo")
            with pytest.raises(grpc.aio.AioRpcError) as unknown:
                await typo(b"")
    assert rest.status_code == 404 and rest.json()["error"]["status"] == "NOT_FOUND", rest.text
    assert rpc.status_code == 200 and rpc.json()["error"]["code"] == -32601, rpc.text
    assert unknown.value.code() == grpc.StatusCode.UNIMPLEMENTED
    for text in (rest.text, rpc.text, str(unknown.value.details())):
        assert "Traceback" not in text and "site-packages" not in text, text


class Wordy:
    description = "Refuse its input, quoting it (100 KB of one dotted word)"
    metadata = {"a2a": {"reply": "message"}}

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        raise InvalidInputError("bad word " + "a." * 50_000)


async def test_a_long_dotted_word_in_an_errors_text_is_answered() -> None:
    """The scrubber's path patterns tried a Python file name at every word start, each
    scan to the word's end: 100 KB of ``a.a.a.`` held the event loop for minutes (166 s
    here), past the client's deadline; they now start only where a path can."""
    registry = Registry()
    registry.register("t.wordy", Wordy())
    port = free_port()
    app, _ = A2AServerFactory(Executor(registry), environ={}, port=port).create()
    async with running_server(app, port=port):
        text = await _refusal(f"http://127.0.0.1:{port}", "JSONRPC", request("t.wordy", {}))
    assert "bad word a.a.a." in text, text


#: ids with control characters: each comes back with them escaped (``\x01``), not dropped
CONTROLS = {"a\x01b": "a\\x01b", "\x01\x1f": "\\x01\\x1f", "c\x7fd\x85": "c\\x7fd\\x85"}


def _message(version: str, task_id: str, skill: str = "t.leaky") -> dict[str, Any]:
    if version == "0.3":
        return {"message": {"messageId": "m-1", "role": "user", "kind": "message",
                            "taskId": task_id, "parts": [{"kind": "text", "text": "x"}],
                            "metadata": {"skillId": skill}}}  # fmt: skip
    return {"message": {"messageId": "m-1", "role": "ROLE_USER", "taskId": task_id,
                        "parts": [{"text": "x"}], "metadata": {"skillId": skill}}}  # fmt: skip


async def _texts(http: httpx.AsyncClient, grpc_port: int, task_id: str, skill: str) -> list[str]:
    """What a message continuing task *task_id* (to *skill*) is answered, per binding and
    version."""
    texts = []
    for version, headers in (("1.0", {"A2A-Version": "1.0"}), ("0.3", {})):
        method = "SendMessage" if version == "1.0" else "message/send"
        body = {"jsonrpc": "2.0", "id": 1, "method": method,
                "params": _message(version, task_id, skill)}  # fmt: skip
        texts.append((await http.post("/", json=body, headers=headers)).json()["error"]["message"])
    rest = await http.post("/message:send", json=_message("1.0", task_id, skill),
                           headers={"A2A-Version": "1.0"})  # fmt: skip
    texts.append(rest.json()["error"]["message"])
    grpc_message = {"messageId": "m-1", "taskId": task_id, "role": "ROLE_USER",
                    "metadata": {"skillId": skill}}  # fmt: skip
    requests = (
        ParseDict({"message": {**grpc_message, "parts": [{"text": "x"}]}}, SendMessageRequest()),
        ParseDict({"request": {**grpc_message, "content": [{"text": "x"}]}},
                  pb03.SendMessageRequest()),
    )  # fmt: skip
    async with stubs(f"127.0.0.1:{grpc_port}") as (v1, v03):
        for stub, made in zip((v1, v03), requests, strict=True):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.SendMessage(made)
            texts.append(str(refused.value.details()))
    return texts


async def test_control_characters_of_an_echoed_id_come_back_escaped() -> None:
    """A follow-up naming task ``a\\x01b`` was answered "Task ab not found" on every
    binding: the scrubber dropped the control character, so the id echoed was not the one
    sent. It is now escaped, readable and as sent; the same for a skill id, and for a
    page token of one NUL ("Invalid page token:" before)."""
    app, port, grpc_port = _agent()
    async with (
        running_server(app, port=port),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", verify=TLS) as http,
    ):
        answers = {}
        for sent, shown in CONTROLS.items():
            answers[f"Task {shown} not found"] = await _texts(http, grpc_port, sent, "t.leaky")
            answers[f"Skill not found: {shown}"] = await _texts(http, grpc_port, "", sent)
        listed = await http.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks",
                                            "params": {"pageToken": "\x00"}},
                                 headers={"A2A-Version": "1.0"})  # fmt: skip
        rest = await http.get(
            "/tasks", params={"pageToken": "\x00"}, headers={"A2A-Version": "1.0"}
        )
        async with stubs(f"127.0.0.1:{grpc_port}") as (v1, _v03):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await v1.ListTasks(a2a_pb2.ListTasksRequest(page_token="\x00"))
        answers["Invalid page token: \\x00"] = [
            listed.json()["error"]["message"],
            rest.json()["error"]["message"],
            str(refused.value.details()),
        ]
    wrong = {want: got for want, got in answers.items() if any(want not in t for t in got)}
    assert not wrong, wrong
