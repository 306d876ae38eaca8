"""``apcore-a2a card | call | task`` end-to-end against live agents (real sockets)."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from apcore_a2a.cli.client import SCHEMA_EXTENSION
from apcore_a2a.client import A2AClient
from tests._support import ROOT, TLS, cli, free_port, running_server
from tests._support import json_lines as lines
from tests.client._apcore_agent import build_our_app
from tests.client._sdk_agent import build_sdk_app
from tests.client._stub_agent import CARD_V10, Recorder, StubAgent, json_reply, sse_reply

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sdk() -> AsyncIterator[tuple[str, Recorder]]:
    port = free_port()
    app = Recorder(build_sdk_app(f"http://127.0.0.1:{port}"))
    async with running_server(app, port=port) as url:
        yield url, app


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ours() -> AsyncIterator[str]:
    port = free_port()
    async with running_server(build_our_app(port), port=port) as url:
        yield url


async def test_card_prints_the_card(ours: str) -> None:
    code, out, err = await cli("card", ours)
    assert code == 0, err
    card = json.loads(out)
    assert {s["id"] for s in card["skills"]} >= {"demo.echo", "demo.add"}
    assert err == ""


async def test_call_text_prints_one_task_line(sdk: tuple[str, Recorder]) -> None:
    url, recorder = sdk
    code, out, err = await cli("call", url, "--text", "hi", "--token", "tok-9")
    assert code == 0, err
    [task] = lines(out)
    assert task["kind"] == "task" and task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"][0]["text"] == "echo: hi"
    assert recorder.seen[-1].headers["authorization"] == "Bearer tok-9"


async def test_call_data_with_skill_on_our_server(ours: str) -> None:
    code, out, err = await cli("call", ours, "--skill", "demo.add", "--data", '{"a": 2, "b": 5}')
    assert code == 0, err
    [task] = lines(out)
    assert task["artifacts"][0]["parts"][0]["data"] == {"sum": 7}


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_call_stream_prints_each_event(sdk: tuple[str, Recorder], protocol: str) -> None:
    url, recorder = sdk
    context = f"ctx-{protocol}"
    code, out, err = await cli(
        "call", url, "--text", "s", "--stream", "--context-id", context, "--protocol", protocol
    )
    assert code == 0, err
    events = lines(out)
    assert events[0]["kind"] == "task" and events[0]["contextId"] == context
    assert events[-1]["kind"] == "status-update" and events[-1]["final"] is True
    expected = "SendStreamingMessage" if protocol == "1.0" else "message/stream"
    assert recorder.rpc_methods()[-1] == expected


async def test_call_file_sends_a_file_part(sdk: tuple[str, Recorder], tmp_path: Path) -> None:
    url, _ = sdk
    path = tmp_path / "note.txt"
    path.write_bytes(b"file body")
    code, out, err = await cli("call", url, "--file", str(path))
    assert code == 0, err
    part = lines(out)[0]["artifacts"][0]["parts"][0]
    assert part["type"] == "file"
    assert (part["filename"], part["mediaType"]) == ("note.txt", "text/plain")


async def test_task_get_and_cancel(ours: str) -> None:
    async with A2AClient(ours) as client:
        task = await client.send_message(
            {"seconds": 30}, skill_id="demo.slow", return_immediately=True
        )
    code, out, err = await cli("task", "cancel", ours, task["id"])
    assert code == 0, err
    assert lines(out)[0]["status"]["state"] == "canceled"
    code, out, err = await cli("task", "get", ours, task["id"], "--history-length", "1")
    assert code == 0, err
    got = lines(out)[0]
    assert got["id"] == task["id"] and got["status"]["state"] == "canceled"


async def test_call_no_wait_returns_the_running_task(ours: str) -> None:
    code, out, err = await cli(
        "call", ours, "--skill", "demo.slow", "--data", '{"seconds": 30}', "--no-wait"
    )
    assert code == 0, err
    [task] = lines(out)
    assert task["status"]["state"] in ("submitted", "working")
    code, out, err = await cli("task", "cancel", ours, task["id"])
    assert code == 0, err
    assert lines(out)[0]["status"]["state"] == "canceled"


async def test_call_no_wait_and_stream_are_exclusive(ours: str) -> None:
    code, _out, err = await cli("call", ours, "--text", "x", "--stream", "--no-wait")
    assert code == 2
    assert "not allowed with argument" in err


async def test_remote_error_exits_1_with_one_line(ours: str) -> None:
    code, out, err = await cli("task", "get", ours, "no-such-task")
    assert code == 1 and out == ""
    assert err.count("\n") == 1
    assert "TaskNotFoundError (-32001)" in err


async def test_unreachable_agent_exits_3() -> None:
    code, out, err = await cli("card", f"http://127.0.0.1:{free_port()}")
    assert code == 3 and out == ""
    assert err.startswith("error: A2AConnectionError") and err.count("\n") == 1


@pytest.mark.parametrize(
    "args",
    [
        ("call", "URL", "--data", "{not json"),
        ("call", "URL", "--file", "/no/such/file"),
        ("call", "not-a-url", "--text", "x"),
        ("call", "URL", "--data", '{"a": NaN}'),
        ("call", "URL", "--data", "[1e999]"),
        ("call", "URL", "--text", "x", "--token", "tök"),
        ("call", "URL", "--text", "x", "--header", "X-Key: a\r\nInjected: 1"),
    ],
    ids=[
        "bad-json",
        "missing-file",
        "bad-url",
        "nan-data",
        "infinite-data",
        "token-not-ascii",
        "header-line-break",
    ],
)
async def test_bad_input_exits_2(sdk: tuple[str, Recorder], args: tuple[str, ...]) -> None:
    url, _ = sdk
    code, out, err = await cli(*(url if a == "URL" else a for a in args))
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1


async def test_a_timeout_of_nan_is_a_usage_error(sdk: tuple[str, Recorder]) -> None:
    """Not a wait that ends at once as if the agent never answered (exit 6)."""
    url, _ = sdk
    code, out, err = await cli("call", url, "--text", "x", "--timeout", "nan")
    assert code == 2 and out == ""
    assert err.splitlines()[-1].endswith(
        "--timeout: must be a positive number of seconds, got 'nan'"
    )


async def test_call_requires_exactly_one_input(sdk: tuple[str, Recorder]) -> None:
    url, _ = sdk
    code, _, err = await cli("call", url, "--text", "a", "--data", "{}")
    assert code == 2 and "not allowed with" in err
    code, _, err = await cli("call", url)
    assert code == 2 and "required" in err


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def signed() -> AsyncIterator[str]:
    port = free_port()
    async with running_server(build_our_app(port, card_signing=True), port=port) as url:
        yield url


async def test_card_verify_prints_the_signed_card(signed: str, tmp_path: Path) -> None:
    code, out, err = await cli("card", signed, "--verify")
    assert code == 0, err
    card = json.loads(out)
    assert card["signatures"] and "url" not in card
    assert err == "card signature verified\n"
    # The same with the agent's keys given as a file (a pinned JWKS).
    import httpx

    async with httpx.AsyncClient(verify=TLS) as http:
        jwks = (await http.get(signed + "/.well-known/jwks.json")).text
    keys = tmp_path / "jwks.json"
    keys.write_text(jwks)
    code, _out, err = await cli("card", signed, "--verify", "--keys", str(keys))
    assert code == 0, err


async def test_card_verify_exits_4_for_an_unsigned_or_foreign_card(
    ours: str, signed: str, tmp_path: Path
) -> None:
    code, out, err = await cli("card", ours, "--verify")
    assert (code, out) == (4, "")
    assert err.startswith("error: CardVerificationError (missing)") and err.count("\n") == 1
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    other = tmp_path / "other.pem"
    other.write_bytes(
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    code, out, err = await cli("card", signed, "--verify", "--keys", str(other))
    assert (code, out) == (4, "")
    assert "CardVerificationError (invalid)" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--keys", "/no/such/keys.json"), "--keys needs --verify"),
        (("--verify", "--keys", "/no/such/keys.json"), "cannot read --keys"),
    ],
)
async def test_card_verify_usage_errors_exit_2(
    ours: str, extra: tuple[str, ...], message: str
) -> None:
    code, out, err = await cli("card", ours, *extra)
    assert (code, out) == (2, "")
    assert message in err


async def test_call_waits_as_long_as_the_task_runs_and_shows_its_progress(ours: str) -> None:
    # Longer than a blocking call used to wait would not fit a unit test; the default
    # now has no bound at all, and the wait shows the task's id, state and elapsed time.
    code, out, err = await cli("call", ours, "--skill", "demo.slow", "--data", '{"seconds": 4}')
    assert code == 0, err
    [task] = lines(out)
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"][0]["data"] == {"done": True}
    assert re.search(rf"^task {task['id']}: working, \d+ s$", err, re.MULTILINE), err


async def test_call_timeout_names_the_task_and_how_to_follow_it(ours: str) -> None:
    code, out, err = await cli(
        "call", ours, "--skill", "demo.slow", "--data", '{"seconds": 30}', "--timeout", "3"
    )
    assert code == 6 and out == "", err
    found = re.search(r"error: task (\S+) is still working after --timeout 3 s", err)
    assert found is not None, err
    task_id = found.group(1)
    assert (
        err.endswith(f"follow it with: apcore-a2a task get {ours} {task_id}\n")
        and "--no-wait" in err
    )
    code, out, err = await cli("task", "cancel", ours, task_id)
    assert code == 0, err


async def test_refused_credentials_exit_5_not_3() -> None:
    port = free_port()
    async with running_server(build_our_app(port, api_keys=["right-key-0123456789"]), port=port):
        url = f"http://127.0.0.1:{port}"
        code, out, err = await cli(
            "call", url, "--header", "X-API-Key: wrong", "--skill", "demo.echo", "--text", "x"
        )
    assert code == 5 and out == "", err
    assert err.startswith("error: A2AAuthenticationError") and err.count("\n") == 1
    # What the agent said, not its JSON body cut in the middle.
    assert err.rstrip().endswith(": Missing or invalid API key"), err
    assert "{" not in err, err


async def test_help_lists_the_exit_codes() -> None:
    code, out, _err = await cli("call", "--help")
    assert code == 0
    for line in (
        "3  the agent cannot be reached",
        "5  the agent refused the credentials",
        "6  call, task resubscribe: the task still runs when --timeout ends",
        "7  call, task resubscribe: the task failed",
        "8  call, task resubscribe: the agent rejected it",
        "9  call, task resubscribe: it was canceled",
    ):
        assert line in out, out


def _ending_in(state: str) -> StubAgent:
    """An agent whose every task ends in *state* at once (status message "why")."""
    why = {"messageId": "m-a", "role": "ROLE_AGENT", "parts": [{"text": "why"}]}
    task = {"id": "t-1", "contextId": "c-1", "status": {"state": state, "message": why}}

    def rpc(body: dict[str, Any]) -> Any:
        wrapped = body["method"] in ("SendMessage", "SendStreamingMessage")
        answer = {"jsonrpc": "2.0", "id": body["id"], "result": {"task": task} if wrapped else task}
        if body["method"] == "SendStreamingMessage":  # a stream is answered as one
            return sse_reply(f"data: {json.dumps(answer)}\n\n")
        return json_reply(answer)

    return StubAgent(rpc=rpc, card=dict(CARD_V10))


@pytest.mark.parametrize(
    ("state", "code"),
    [
        ("TASK_STATE_FAILED", 7),
        ("TASK_STATE_REJECTED", 8),
        ("TASK_STATE_CANCELED", 9),
        ("TASK_STATE_COMPLETED", 0),
        ("TASK_STATE_INPUT_REQUIRED", 0),
    ],
)
@pytest.mark.parametrize(
    "mode", [(), ("--stream",), ("--no-wait",)], ids=["wait", "stream", "no-wait"]
)
async def test_call_exits_with_the_code_of_how_its_task_ended(
    state: str, code: int, mode: tuple[str, ...]
) -> None:
    port = free_port()
    stub = _ending_in(state)
    rpc = f"http://127.0.0.1:{port}/rpc"
    stub.card["supportedInterfaces"] = [
        {"url": rpc, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    async with running_server(stub, port=port) as url:
        got, out, err = await cli("call", url, "--text", "x", *mode)
    assert got == code, err
    assert lines(out)[-1]["status"]["state"] == state.removeprefix("TASK_STATE_").lower().replace(
        "_", "-"
    )
    if code:
        name = state.removeprefix("TASK_STATE_").lower()
        assert err == f"error: task t-1 {name}: why\n", err
    else:
        assert "error" not in err


async def test_card_skills_show_each_skills_schemas(ours: str) -> None:
    code, out, err = await cli("card", ours, "--skills")
    assert code == 0, err
    skills = {s["id"]: s for s in json.loads(out)}
    add = skills["demo.add"]
    assert list(add)[:2] == ["id", "name"]  # the skill's own fields first, then its schemas
    assert add["name"] and add["inputSchema"]["required"] == ["a", "b"]
    assert add["outputSchema"]["properties"]["sum"]["type"] == "integer"
    assert skills["demo.echo"]["inputSchema"]["properties"]["text"]["type"] == "string"


async def test_card_skills_of_an_agent_without_schemas(sdk: tuple[str, Recorder]) -> None:
    code, out, err = await cli("card", sdk[0], "--skills")
    assert code == 0, err
    [echo] = json.loads(out)
    assert echo["id"] == "echo" and "inputSchema" not in echo


async def test_agent_text_reaches_the_terminal_without_its_control_characters() -> None:
    """An agent's words (card, error message, task) cannot drive the terminal: ESC, BEL and
    C1 controls are printed as escapes, on stderr's one line and in stdout's JSON."""
    trap = "\x1b]0;owned\x07\x1b[2J\x9b31m"
    stub = StubAgent(
        rpc=lambda body: json_reply(
            {"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32001, "message": trap}}
        ),
        card=CARD_V10 | {"name": trap},
    )
    port = free_port()
    stub.card["supportedInterfaces"] = [
        {"url": f"http://127.0.0.1:{port}/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    async with running_server(stub, port=port) as url:
        failed, _out, err = await cli("task", "get", url, "t-1")
        shown, out, _err = await cli("card", url)
    assert failed == 1
    assert err == "error: TaskNotFoundError (-32001): \\x1b]0;owned\\x07\\x1b[2J\\x9b31m\n"
    assert shown == 0 and json.loads(out)["name"] == trap  # the same value, escaped
    assert not {"\x1b", "\x07", "\x9b"} & set(out + err)


@pytest.mark.parametrize(
    "card",
    [
        {"capabilities": [1, 2]},
        {"skills": ["x", {"id": "s"}], "capabilities": {"extensions": ["x", {"params": 3}]}},
        {"capabilities": {"extensions": [{"uri": SCHEMA_EXTENSION, "params": {"skills": 1}}]}},
    ],
    ids=["capabilities-list", "strings-in-lists", "skills-not-an-object"],
)
async def test_card_members_of_the_wrong_type_are_no_traceback(card: dict[str, Any]) -> None:
    port = free_port()
    stub = _ending_in("TASK_STATE_COMPLETED")
    stub.card |= card | {
        "supportedInterfaces": [
            {
                "url": f"http://127.0.0.1:{port}/",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ]
    }
    async with running_server(stub, port=port) as url:
        called, out, err = await cli("call", url, "--text", "x")
        listed, skills, skills_err = await cli("card", url, "--skills")
    assert (called, listed) == (0, 0), err + skills_err
    assert lines(out)[-1]["status"]["state"] == "completed"
    assert all(isinstance(s, dict) for s in json.loads(skills))


#: characters that change what a terminal shows without being controls: bidi overrides and
#: isolates (Trojan Source), zero-width and invisible format characters, a line separator,
#: a byte order mark, Unicode tags (invisible ASCII look-alikes), an Arabic letter mark
INVISIBLE = "\u202e\u2066\u2069\u200b\u200f\u2028\ufeff\U000e0041\u061c\u00ad"


async def test_agent_text_reaches_the_terminal_without_bidi_or_invisible_characters() -> None:
    """Bidi and invisible characters in what the agent says (card name, skill description,
    task message, error message) are escaped like control characters: on stderr's line as
    ``\\u202e``-style escapes, in stdout's JSON as JSON escapes (the same value)."""
    trap = f"safe{INVISIBLE}txt.exe"
    why = {"messageId": "m-a", "role": "ROLE_AGENT", "parts": [{"text": trap}]}
    task = {
        "id": "t-1",
        "contextId": "c-1",
        "status": {"state": "TASK_STATE_FAILED", "message": why},
    }

    def rpc(body: dict[str, Any]) -> Any:
        if body["method"] == "GetTask":
            error = {"code": -32001, "message": trap}
            return json_reply({"jsonrpc": "2.0", "id": body["id"], "error": error})
        return json_reply({"jsonrpc": "2.0", "id": body["id"], "result": {"task": task}})

    port = free_port()
    skill = {"id": "s", "name": "s", "description": trap, "tags": []}
    stub = StubAgent(rpc=rpc, card=CARD_V10 | {"name": trap, "skills": [skill]})
    stub.card["supportedInterfaces"] = [
        {"url": f"http://127.0.0.1:{port}/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    async with running_server(stub, port=port) as url:
        shown, card_out, _ = await cli("card", url)
        listed, skills_out, _ = await cli("card", url, "--skills")
        called, call_out, call_err = await cli("call", url, "--text", "x", "--no-wait")
        failed, _, get_err = await cli("task", "get", url, "t-1")
    assert (shown, listed, called, failed) == (0, 0, 7, 1)
    card = json.loads(card_out)
    assert card["name"] == trap and card["skills"][0]["description"] == trap
    assert json.loads(skills_out)[0]["description"] == trap
    assert lines(call_out)[0]["status"]["message"]["parts"][0]["text"] == trap
    assert "\\u202e" in call_err and "\\u202e" in get_err, call_err + get_err
    for text in (card_out, skills_out, call_out, call_err, get_err):
        assert not set(INVISIBLE) & set(text), ascii(text)


async def test_every_invisible_character_of_this_unicode_database_is_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The CLI's list of invisible characters covers this Python's Unicode database: every
    control (Cc), format (Cf) and line or paragraph separator (Zl, Zp) character."""
    import sys
    import unicodedata

    from apcore_a2a.cli import emit, printable

    kinds = ("Cc", "Cf", "Zl", "Zp")
    every = "".join(
        chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) in kinds
    )
    emit({"text": every})
    out = capsys.readouterr().out
    assert json.loads(out)["text"] == every
    assert not set(every) & set(out.rstrip("\n")), ascii(set(every) & set(out))
    assert not set(every) & set(printable(every))


class _Stalling:
    """An agent that starts every answer (an SSE event, a JSON body) and sends no more
    until the client goes away."""

    def __init__(self, port: int) -> None:
        card = CARD_V10 | {
            "supportedInterfaces": [
                {
                    "url": f"http://127.0.0.1:{port}/",
                    "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0",
                }
            ]
        }
        self.stub = StubAgent(card=card)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.stub(scope, receive, send)
            return
        await receive()  # the request
        streaming = b"text/event-stream" in dict(scope["headers"]).get(b"accept", b"")
        media_type = b"text/event-stream" if streaming else b"application/json"
        start = {"type": "http.response.start", "status": 200}
        await send(start | {"headers": [(b"content-type", media_type)]})
        body = b'data: {"jsonrpc"' if streaming else b'{"jsonrpc"'
        await send({"type": "http.response.body", "body": body, "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass


@pytest.mark.parametrize("mode", ["--stream", "--no-wait"])
async def test_call_timeout_bounds_a_stream_and_a_no_wait_call(mode: str) -> None:
    """``--timeout`` bounds the whole wait in every mode of ``call``: exit 6, one line.
    With ``--stream`` or ``--no-wait`` it was ignored, so a stalled agent held the
    command for ever."""
    port = free_port()
    async with running_server(_Stalling(port), port=port) as url:
        code, out, err = await cli("call", url, "--text", "x", mode, "--timeout", "1")
    assert code == 6 and out == "", err
    assert (
        err
        == "error: no answer from the agent after --timeout 1 s; a longer --timeout waits longer\n"
    )


async def test_push_commands_show_no_status_from_an_agent_without_the_status_route(
    sdk: tuple[str, Recorder],
) -> None:
    """Another vendor's agent (plain a2a-sdk) declares no push status route: ``push set``
    and ``push list`` print A2A's configs alone, never ask for it, and succeed."""
    url, recorder = sdk
    code, out, err = await cli("call", url, "--text", "hi")
    assert code == 0, err
    [task] = lines(out)
    code, out, err = await cli("push", "set", url, task["id"], "https://e.com/h", "--id", "p1")
    assert code == 0, err
    [created] = lines(out)
    assert (created["id"], created["url"]) == ("p1", "https://e.com/h")
    assert "status" not in created and "statusReason" not in created
    code, out, err = await cli("push", "list", url, task["id"])
    assert code == 0, err
    assert [c["id"] for c in lines(out)] == ["p1"]
    assert not [s for s in recorder.seen if s.path.startswith("/push/")]


async def test_a_card_with_a_lone_surrogate_is_printed_escaped() -> None:
    """JSON may spell half a surrogate pair (``"\\ud800"``); Python reads it into a string
    that no UTF-8 terminal takes. It is printed as JSON's escape (the same value), not
    refused as the user's bad input (exit 2) with nothing printed."""
    port = free_port()
    stub = StubAgent(card=CARD_V10 | {"name": "a\ud800b"})
    async with running_server(stub, port=port) as url:
        code, out, err = await cli("card", url)
    assert code == 0, err
    assert '"name": "a\\ud800b"' in out and json.loads(out)["name"] == "a\ud800b"


class _WorkingForEver:
    """An agent whose stream sends one ``working`` task of id *task_id* and no more."""

    def __init__(self, port: int, task_id: str) -> None:
        self.stub, self.task_id = _Stalling(port).stub, task_id

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.stub(scope, receive, send)
            return
        request = json.loads((await receive())["body"])
        task = {"id": self.task_id, "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}
        event = {"jsonrpc": "2.0", "id": request["id"], "result": {"task": task}}
        start = {"type": "http.response.start", "status": 200}
        await send(start | {"headers": [(b"content-type", b"text/event-stream")]})
        body = b"data: " + json.dumps(event).encode() + b"\n\n"
        await send({"type": "http.response.body", "body": body, "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass


async def test_the_command_to_follow_a_task_is_safe_to_paste() -> None:
    """The ``task get`` command printed when ``--timeout`` ends names the agent's task id
    quoted for the shell: pasted, an id such as ``x'; touch pwned; '`` is the id, not a
    second command."""
    port = free_port()
    task_id = "t-1'; touch pwned; echo '"
    async with running_server(_WorkingForEver(port, task_id), port=port) as url:
        code, _out, err = await cli("call", url, "--text", "x", "--timeout", "2")
    assert code == 6, err
    command = err.rstrip("\n").rpartition("follow it with: ")[2]
    assert shlex.split(command) == ["apcore-a2a", "task", "get", url, task_id], err


async def test_a_header_without_a_colon_is_not_repeated() -> None:
    """A malformed ``--header`` is refused without echoing it: it is often an API key."""
    code, out, err = await cli("card", "http://127.0.0.1:1", "--header", "X-Key=s3cret")
    assert (code, out) == (2, ""), err
    assert "--header" in err and "s3cret" not in err


async def test_an_agents_long_error_message_is_cut_on_the_error_line() -> None:
    """The one stderr line shows the start of what the agent said, not megabytes of it."""
    said = "no such task " + "x" * 1_000_000
    stub = StubAgent(
        rpc=lambda body: json_reply(
            {"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32001, "message": said}}
        ),
    )
    port = free_port()
    stub.card["supportedInterfaces"] = [
        {"url": f"http://127.0.0.1:{port}/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    async with running_server(stub, port=port) as url:
        code, _out, err = await cli("task", "get", url, "t-1")
    assert code == 1
    assert err.startswith("error: TaskNotFoundError (-32001): no such task xxx")
    assert err.endswith("x... (cut)\n") and len(err) < 2100 and err.count("\n") == 1


async def test_card_verify_of_a_card_the_sdk_finds_incomplete_prints_one_line(
    tmp_path: Path,
) -> None:
    """a2a-sdk logs a warning while it checks a card without the members A2A requires
    (here: no skills); the command's stderr stays its own one line, however many members
    the agent's card leaves out."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    keys = tmp_path / "key.pem"
    keys.write_bytes(
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    skills = [{"tags": []}] * 1000  # each without id, name, description, tags
    stub = StubAgent(card=CARD_V10 | {"skills": skills, "signatures": [{"protected": "e30"}]})
    async with running_server(stub) as url:
        code, out, err = await cli("card", url, "--verify", "--keys", str(keys))
    assert (code, out) == (4, "")
    assert err.startswith("error: CardVerificationError (invalid)") and err.count("\n") == 1, err


async def test_an_interrupted_call_exits_130_not_0(ours: str) -> None:
    # Ctrl-C ends the wait, not the task: a script must not read it as the task's success.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "apcore_a2a", "call", ours, "--skill", "demo.slow",
        "--data", '{"seconds": 30}', cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    progress = await asyncio.wait_for(proc.stderr.readline(), 60)
    found = re.match(rb"task (\S+): working", progress)
    assert found is not None, progress
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 130, (out, err)
    assert out == b"" and b"Traceback" not in err, err
    code, _out, err_text = await cli("task", "cancel", ours, found.group(1).decode())
    assert code == 0, err_text
