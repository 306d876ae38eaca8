"""Resubscribe that loses nothing: SSE ids and ``Last-Event-ID`` replay in cluster mode.

``text.countdown`` runs on replica A; a client follows it on B with ``SubscribeToTask``,
drops the connection after a few chunks and reconnects to the *other* replica (A) with
the last id it saw (with the memory store: to the same server, from its event log), or
with the id of the snapshot that started it; the snapshot's chunks and those that follow
make the countdown exactly once, in order, ending with ``completed`` — on memory, SQLite
and PostgreSQL, over JSON-RPC 1.0 (header), JSON-RPC 0.3 ``tasks/resubscribe`` (metadata
field) and REST 1.0 and 0.3 (header). A ``SendStreamingMessage`` / ``message/stream``
stream (JSON-RPC and REST, 1.0 and 0.3) cut the same way resumes with a subscription from
its last id.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._sdk import request

from .._postgres import pg_schema_url
from .._support import TLS, cli_server, find_key, free_port, sse_frames
from ._a2a import EXTENSIONS, client, send

TIMEOUT = 30.0
#: countdown start per task in the 20-task test: 47 chunks + task, working and completed
#: make 50 events a task, 1,000 in all
CHUNKS = 46


@contextlib.contextmanager
def _pair(backend: str, folder: Path) -> Iterator[tuple[str, str]]:
    """Two cluster replicas; for ``memory``, one server (its bounded event log) twice."""
    if backend == "memory":
        with cli_server(["--extensions-dir", EXTENSIONS, "--task-store", "memory://"]) as (a, _p):
            yield a, a
        return
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            url = f"sqlite:///{folder / 'tasks.db'}"
        else:
            url = stack.enter_context(pg_schema_url(agents=2))
        # These tests open up to 20 streams of one caller at once, right after others
        # closed on the other replica (whose slots it keeps leased for a second): the
        # per-caller quota is tests/reliability/test_hostile_quotas.py's subject, not theirs.
        args = ["--extensions-dir", EXTENSIONS, "--task-store", url, "--cluster"]
        args += ["--max-streams-per-caller", "0"]
        a, _pa = stack.enter_context(cli_server(args))
        b, _pb = stack.enter_context(cli_server(args))
        yield a, b


@pytest.fixture(scope="module", params=["memory", "sqlite", "postgresql"])
def replicas(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    with _pair(request.param, tmp_path_factory.mktemp("resume")) as pair:
        yield pair


def _subscribe_call(
    dialect: str, base: str, task_id: str, last_id: str | None
) -> tuple[str, str, dict[str, Any], Any]:
    """(method, URL, headers, JSON body) of a subscription in *dialect* (a header value
    outside ASCII goes as its latin-1 byte where it has one, as HTTP carries it)."""
    headers: dict[str, Any] = {"A2A-Version": "0.3" if dialect.endswith("0.3") else "1.0"}
    if last_id is not None and dialect != "jsonrpc-0.3":
        latin = last_id.encode("latin-1", "ignore")
        headers["Last-Event-ID"] = last_id if last_id.isascii() else latin or last_id.encode()
    if dialect.startswith("rest"):
        prefix = "/v1" if dialect == "rest-0.3" else ""
        return "POST", f"{base}{prefix}/tasks/{task_id}:subscribe", headers, None
    if dialect == "jsonrpc-1.0":
        params: dict[str, Any] = {"id": task_id}
        method = "SubscribeToTask"
    else:
        params = {"id": task_id}
        if last_id is not None:
            params["metadata"] = {"lastEventId": last_id}
        method = "tasks/resubscribe"
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
    return "POST", f"{base}/", headers, body


def _stream_call(dialect: str, base: str, start: int) -> tuple[str, str, dict[str, str], Any]:
    """(method, URL, headers, JSON body) of a streamed ``text.countdown`` message."""
    legacy = dialect.endswith("0.3")
    part = {"data": {"start": start, "delay": 0.05}}
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "user" if legacy else "ROLE_USER",
        "parts": [{"kind": "data", **part} if legacy else part],
        "metadata": {"skillId": "text.countdown"},
    }
    if legacy:
        message["kind"] = "message"
    headers = {"A2A-Version": "0.3" if legacy else "1.0"}
    if dialect == "rest-0.3":  # the JSON form of the 0.3 protobuf schema
        del message["kind"], message["parts"]
        message.update(role="ROLE_USER", content=[{"data": part}])
        return "POST", base + "/v1/message:stream", headers, {"message": message}
    if dialect == "rest-1.0":
        return "POST", base + "/message:stream", headers, {"message": message}
    method = "message/stream" if legacy else "SendStreamingMessage"
    body = {
        "jsonrpc": "2.0",
        "id": uuid.uuid4().hex,
        "method": method,
        "params": {"message": message},
    }
    return "POST", f"{base}/", headers, body


async def _read(
    http: httpx.AsyncClient, call: tuple[str, str, dict[str, str], Any], cut_after: int | None
) -> tuple[list[tuple[str | None, Any]], bool]:
    """SSE events ``(id, payload)`` of one connection; cut after *cut_after* chunks."""
    method, url, headers, body = call
    events: list[tuple[str | None, Any]] = []
    chunks = 0
    async with http.stream(method, url, headers=headers, json=body) as response:
        assert response.status_code == 200, await response.aread()
        async with contextlib.aclosing(sse_frames(response)) as frames:
            async for event_id, payload in frames:
                assert "error" not in payload, payload
                events.append((event_id, payload))
                chunks += _chunk(payload) is not None
                if cut_after is not None and chunks >= cut_after:
                    return events, True  # leaving the block drops the connection
    return events, False


def _chunk(payload: Any) -> Any:
    """The artifact update in one event (1.0 or 0.3 shape), else ``None``."""
    result = payload.get("result", payload)
    if "artifactUpdate" in result:
        return result["artifactUpdate"]
    return result if result.get("kind") == "artifact-update" else None


def _remaining(events: list[tuple[str | None, Any]], skip_first: bool) -> list[int]:
    payloads = [p for _id, p in events][1 if skip_first else 0 :]
    return [int(v) for p in payloads for v in find_key(_chunk(p), "remaining")]


@pytest.mark.parametrize("dialect", ["jsonrpc-1.0", "jsonrpc-0.3", "rest-1.0", "rest-0.3"])
async def test_a_cut_subscription_resumes_on_the_other_replica_exactly_once(
    replicas: tuple[str, str], dialect: str
) -> None:
    """Every id names the one event a replay from 0 sends with it; the subscription's
    first event, the task as it is, is in no replay: its id is its own. From it, or from
    the last id before the cut, the rest of the countdown comes exactly once."""
    a, b = replicas
    started = await send(
        await client(a),
        request("text.countdown", {"start": 15, "delay": 0.1}, return_immediately=True),
    )
    async with httpx.AsyncClient(timeout=TIMEOUT, verify=TLS) as http:
        first, cut = await _read(http, _subscribe_call(dialect, b, started.id, None), 4)
        assert cut
        rest, cut = await _read(http, _subscribe_call(dialect, a, started.id, first[-1][0]), None)
        after, _cut = await _read(http, _subscribe_call(dialect, a, started.id, first[0][0]), None)
        whole, _cut = await _read(http, _subscribe_call(dialect, a, started.id, "0"), None)
    assert not cut
    named = {event_id: _result(p) for event_id, p in whole}
    assert first[0][0] is not None and first[0][0] not in named, first[0][0]
    ids = [event_id for event_id, _p in first[1:] + rest]
    assert [named.get(i) for i in ids] == [_result(p) for _i, p in first[1:] + rest]
    assert [int(i or -1) for i in ids] == sorted({int(i or -1) for i in ids}), "ids go back"
    shown = [int(v) for v in find_key(_result(first[0][1]), "remaining")]
    live = _remaining(first, skip_first=True) + _remaining(rest, skip_first=False)
    assert shown + live == list(range(15, -1, -1)), (shown, live)
    assert shown + _remaining(after, skip_first=False) == list(range(15, -1, -1))
    for events in (rest, after):
        states = find_key(events[-1][1], "state")
        assert states and str(states[-1]).lower() in ("task_state_completed", "completed")
    print(f"{dialect}: {len(first)} events before the cut, {len(rest)} replayed + live after")


def _result(payload: Any) -> Any:
    return payload.get("result", payload)


@pytest.mark.parametrize("dialect", ["jsonrpc-1.0", "jsonrpc-0.3", "rest-1.0", "rest-0.3"])
async def test_a_cut_message_stream_resumes_by_subscription_exactly_once(
    replicas: tuple[str, str], dialect: str
) -> None:
    """SendStreamingMessage / message/stream events carry ids in the same log: a client
    whose message stream broke resumes it with a subscription on the other replica."""
    a, b = replicas
    async with httpx.AsyncClient(timeout=TIMEOUT, verify=TLS) as http:
        first, cut = await _read(http, _stream_call(dialect, b, 8), 4)
        assert cut
        task_id = find_key(first[0][1].get("result", first[0][1]), "id")[0]
        last_id = first[-1][0]
        assert last_id is not None
        rest, cut = await _read(http, _subscribe_call(dialect, a, task_id, last_id), None)
    assert not cut
    ids = [int(event_id or -1) for event_id, _p in first + rest]
    assert ids == sorted(set(ids)) and ids[0] > 0, ids
    # task, working, then every chunk once and in order, then completed: nothing twice
    live = _remaining(first, skip_first=True) + _remaining(rest, skip_first=False)
    assert live == list(range(8, -1, -1)), live
    states = [str(s).lower() for e in first + rest for s in find_key(_status_of(e[1]), "state")]
    assert states[-1] in ("task_state_completed", "completed") and len(states) == 3, states
    print(f"{dialect}: {len(first)} events streamed before the cut, {len(rest)} after")


def _status_of(payload: Any) -> Any:
    """The status of a task or status-update event (not the statuses inside artifacts)."""
    result = payload.get("result", payload)
    for key in ("task", "statusUpdate"):
        if key in result:
            return result[key].get("status", {})
    return result.get("status", {}) if result.get("kind") in ("task", "status-update") else {}


@pytest.mark.parametrize("last_id", ["not-an-id", "\u00b2", "\u0663"])
@pytest.mark.parametrize("dialect", ["jsonrpc-1.0", "jsonrpc-0.3", "rest-1.0", "rest-0.3"])
async def test_a_last_event_id_that_is_no_id_is_refused(
    replicas: tuple[str, str], dialect: str, last_id: str
) -> None:
    """Also a digit outside ASCII (``²``, Arabic-Indic ``٣``: Python's ``isdigit`` says
    yes, ``int`` refuses ``²``): issue 40 item 8 saw HTTP 500 with a traceback."""
    a, _b = replicas
    started = await send(
        await client(a),
        request("text.countdown", {"start": 3, "delay": 0.1}, return_immediately=True),
    )
    method, url, headers, body = _subscribe_call(dialect, a, started.id, last_id)
    async with httpx.AsyncClient(timeout=TIMEOUT, verify=TLS) as http:
        response = await http.request(method, url, headers=headers, json=body)
    if dialect.startswith("rest"):
        assert response.status_code == 400, response.text
        assert "Last-Event-ID" in response.json()["error"]["message"]
    else:
        assert response.status_code == 200, response.text
        assert "-32602" in response.text and "Last-Event-ID" in response.text, response.text


async def test_twenty_concurrent_tasks_replay_from_zero_exactly_once(
    replicas: tuple[str, str],
) -> None:
    """``Last-Event-ID: 0`` on B while A runs 20 tasks: every event of each, once, in order."""
    import asyncio

    a, b = replicas
    ca = await client(a)
    started = await asyncio.gather(
        *(
            send(
                ca,
                request(
                    "text.countdown", {"start": CHUNKS, "delay": 0.01}, return_immediately=True
                ),
            )
            for _ in range(20)
        )
    )
    async with httpx.AsyncClient(timeout=TIMEOUT, verify=TLS) as http:
        streams = await asyncio.gather(
            *(_read(http, _subscribe_call("jsonrpc-1.0", b, t.id, "0"), None) for t in started)
        )
    total = 0
    for events, cut in streams:
        assert not cut
        ids = [int(event_id or -1) for event_id, _p in events]
        assert ids == sorted(set(ids)) and ids[0] > 0, ids
        assert "task" in events[0][1]["result"]  # the submitted task, first
        assert _remaining(events, skip_first=False) == list(range(CHUNKS, -1, -1))
        states = find_key(events[-1][1], "state")
        assert states[-1] == "TASK_STATE_COMPLETED"
        total += len(events)
    assert total >= 1000 == 20 * (CHUNKS + 4)  # task, working, the chunks, completed
    print(f"replayed {total} events of 20 tasks")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_a_replica_restarted_mid_stream_resumes_from_the_store(
    backend: str, tmp_path: Path
) -> None:
    """B serves a subscription, is cut off and restarted (a new process on its port) while
    A still runs the task; the client resumes on the new B with its last id: exactly once."""
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            url = f"sqlite:///{tmp_path / 'tasks.db'}"
        else:
            url = stack.enter_context(pg_schema_url(agents=2))
        # These tests open up to 20 streams of one caller at once, right after others
        # closed on the other replica (whose slots it keeps leased for a second): the
        # per-caller quota is tests/reliability/test_hostile_quotas.py's subject, not theirs.
        args = ["--extensions-dir", EXTENSIONS, "--task-store", url, "--cluster"]
        args += ["--max-streams-per-caller", "0"]
        a, _pa = stack.enter_context(cli_server(args))
        port_b = free_port()
        async with httpx.AsyncClient(timeout=TIMEOUT, verify=TLS) as http:
            with cli_server(args, port=port_b) as (b, _pb):
                started = await send(
                    await client(a),
                    request("text.countdown", {"start": 20, "delay": 0.1}, return_immediately=True),
                )
                first, cut = await _read(
                    http, _subscribe_call("jsonrpc-1.0", b, started.id, None), 4
                )
            # B has stopped (SIGTERM, exit 0 checked by cli_server); A runs on.
            assert cut
            last_id = first[-1][0]
            with cli_server(args, port=port_b) as (b_again, _pb2):
                rest, cut = await _read(
                    http, _subscribe_call("jsonrpc-1.0", b_again, started.id, last_id), None
                )
    assert not cut
    ids = [int(i or -1) for i, _p in first[1:] + rest]  # the snapshot's id is its own
    assert ids == sorted(set(ids)), "ids repeat or go back"
    live = _remaining(first, skip_first=True) + _remaining(rest, skip_first=False)
    assert live == list(range(live[0], -1, -1)), live
    assert str(find_key(rest[-1][1], "state")[-1]) == "TASK_STATE_COMPLETED"
