"""A task's stored events grow with its conversation, not with its square.

Each follow-up to an ``input-required`` task is saved by a2a-sdk with the whole task as its
event: the event log held one copy of the history per turn (SQLite, 21 answers of 100 KB:
29.4 MB of ``task_events`` for a 2.1 MB history). A whole-task event supersedes every
earlier event of its task for replay, so storing it drops them (``docs/storage.md``,
*What a long conversation writes*). On memory, SQLite and PostgreSQL, single and cluster
(two replicas on one store, the reader on the other): the stored event bytes stay within
twice the history; a resume from any id before the latest whole task gets that task first,
then what followed it, ids rising, none twice, over JSON-RPC and REST (1.0 and 0.3);
gRPC's SubscribeToTask (no ids) gets the task whole; a stream cut before a compaction
resumes from its last id without a gap, and a live subscriber sees the compacting
follow-up as it comes; a streamed artifact (its chunks in the log while its task runs)
stays whole across the turns that compact.
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc.aio
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from apcore import Executor, ModuleAnnotations, Registry

from apcore_a2a import A2AServerFactory, InputRequired
from apcore_a2a.storage.event_log import MemoryEventLog

from .._modules import EchoIn, Talk
from .._postgres import _run, pg_schema_url
from .._support import TLS, find_key, free_port, sse_frames, threaded_server
from .test_resume_e2e import _subscribe_call

ANSWER = 10_000  # characters of each answer
TURNS = 12
H = {"A2A-Version": "1.0"}


class Chat:
    """Streams three chunks of an artifact, then asks again until told ``bye``."""

    input_schema = EchoIn
    output_schema = EchoIn
    description = "Stream, then ask again until told bye"
    annotations = ModuleAnnotations(streaming=True)

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"text": inputs["text"]}

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        for n in range(3):
            yield {"text": f"{inputs['text']}-{n}"}
        if inputs["text"] != "bye":
            raise InputRequired("And then?", field="text")


@dataclass
class Agent:
    """One store, one or two servers on it (cluster: the reader is the other replica)."""

    writer: str
    reader: str
    grpc_address: str
    #: the memory store's event log, or the SQL store's URL
    store: Any

    def stored(self, task_id: str) -> tuple[int, int]:
        """(events, bytes) the store holds of *task_id*'s event log."""
        if isinstance(self.store, MemoryEventLog):
            log = [size for _seq, _event, size in self.store._logs.get(task_id, ())]
            return len(log), sum(log)
        sql = "SELECT count(*), coalesce(sum(length(event_data)), 0) FROM task_events "
        sql += f"WHERE task_id = '{task_id}'"
        if self.store.startswith("sqlite"):
            with contextlib.closing(sqlite3.connect(self.store.split("///", 1)[1])) as db:
                count, size = db.execute(sql).fetchone()
                return int(count), int(size)
        schema = self.store.rsplit("schema=", 1)[1]
        [row] = _run(sql.replace("task_events", f"{schema}.task_events"), fetch=True)
        return int(row[0]), int(row[1])


def _app(store: str | None, port: int, grpc_port: int, cluster: bool) -> Any:
    registry = Registry()
    registry.register("talk.on", Talk())
    registry.register("chat.on", Chat())
    extra: dict[str, Any] = {"task_store": store, "cluster": cluster} if store else {}
    app, _card = A2AServerFactory(
        Executor(registry), environ={}, port=port, grpc_port=grpc_port, **extra
    ).create()
    return app


@pytest.fixture(
    scope="module",
    params=["memory", "sqlite", "sqlite-cluster", "postgresql", "postgresql-cluster"],
)
def agent(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Agent]:
    kind, _, mode = str(request.param).partition("-")
    cluster = mode == "cluster"
    with contextlib.ExitStack() as stack:
        if kind == "memory":
            store = None
        elif kind == "sqlite":
            store = f"sqlite:///{Path(tmp_path_factory.mktemp('compact')) / 'tasks.db'}"
        else:
            store = stack.enter_context(pg_schema_url(agents=2))
        ports = [free_port() for _ in range(4)]
        app = _app(store, ports[0], ports[1], cluster)
        writer = stack.enter_context(threaded_server(app, port=ports[0]))
        reader, grpc_port = writer, ports[1]
        if cluster:
            reader = stack.enter_context(
                threaded_server(_app(store, ports[2], ports[3], cluster), port=ports[2])
            )
            grpc_port = ports[3]
        log = app.state.a2a.stores.event_log
        yield Agent(writer, reader, f"127.0.0.1:{grpc_port}", store or log)


def _message(text: str, task_id: str | None = None, skill: str = "talk.on") -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        "metadata": {"skillId": skill},
    }
    if task_id:
        message["taskId"] = task_id
    return message


def _rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


async def _answer(http: httpx.AsyncClient, url: str, task_id: str, turn: int) -> None:
    body = _rpc("SendMessage", message=_message(f"{turn}" + "x" * ANSWER, task_id))
    answer = (await http.post(url + "/", json=body, headers=H)).json()
    assert find_key(answer, "state")[-1] == "TASK_STATE_INPUT_REQUIRED", answer


async def _started(http: httpx.AsyncClient, url: str) -> tuple[str, list[str]]:
    """A streamed first message of a new task: its id, and its events' SSE ids."""
    ids: list[str] = []
    task_id = ""
    body = _rpc("SendStreamingMessage", message=_message("hello"))
    async with (
        http.stream("POST", url + "/", json=body, headers=H) as response,
        contextlib.aclosing(sse_frames(response)) as frames,
    ):
        async for event_id, payload in frames:
            assert event_id is not None, payload
            ids.append(event_id)
            task_id = task_id or payload["result"]["task"]["id"]
    return task_id, ids


def _kind(payload: dict[str, Any]) -> str:
    """The kind of one streamed event, in any binding and version."""
    result = payload.get("result", payload)
    if "kind" in result:
        return str(result["kind"]).replace("-", "_")
    (kind,) = (
        key for key in result if key in ("task", "statusUpdate", "artifactUpdate", "message")
    )
    return {"statusUpdate": "status_update", "artifactUpdate": "artifact_update"}.get(kind, kind)


def _history_of(payload: dict[str, Any]) -> int:
    result = payload.get("result", payload)
    return len(result.get("task", result).get("history", []))


async def _replay(
    http: httpx.AsyncClient, url: str, task_id: str, last_id: str, dialect: str = "jsonrpc-1.0"
) -> list[tuple[int, str, dict[str, Any]]]:
    """A resumed subscription read to its end (the task waits for input): (id, kind,
    payload) of each event."""
    method, to, headers, body = _subscribe_call(dialect, url, task_id, last_id)
    frames_read: list[tuple[int, str, dict[str, Any]]] = []
    async with (
        http.stream(method, to, headers=headers, json=body) as response,
        contextlib.aclosing(sse_frames(response)) as frames,
    ):
        assert response.status_code == 200
        async for event_id, payload in frames:
            assert "error" not in payload and event_id is not None, payload
            frames_read.append((int(event_id), _kind(payload), payload))
    return frames_read


def _rising(ids: list[int]) -> None:
    assert ids == sorted(set(ids)), f"ids not rising, or one twice: {ids}"


async def test_a_conversations_events_grow_with_it_and_replay_from_any_id(agent: Agent) -> None:
    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
        task_id, first_ids = await _started(http, agent.writer)
        for turn in range(TURNS):
            await _answer(http, agent.writer, task_id, turn)
        got = (
            await http.post(agent.reader + "/", json=_rpc("GetTask", id=task_id), headers=H)
        ).json()
        history = len(got["result"]["history"])
        events, stored = agent.stored(task_id)
        print(f"{TURNS} answers of {ANSWER}: {events} events, {stored} bytes")
        # One copy of the history (the latest whole task) and the last turn's events; before,
        # a copy per turn: TURNS * (TURNS + 1) / 2 answers' worth (about 780 KB here).
        assert stored <= 2 * (TURNS + 1) * (ANSWER + 200), (events, stored)
        # From the first id, from the id just after, on every binding: the latest whole task
        # first, then what followed it, each once.
        replays = {}
        for dialect in ("jsonrpc-1.0", "jsonrpc-0.3", "rest-1.0", "rest-0.3"):
            for start in (first_ids[0], str(int(first_ids[-1]) + 1)):
                frames = await _replay(http, agent.reader, task_id, start, dialect)
                kinds = [kind for _id, kind, _payload in frames]
                assert kinds[0] == "task" and kinds.count("task") == 1, kinds
                assert _history_of(frames[0][2]) >= history - 1, (history, kinds)
                _rising([seq for seq, _k, _p in frames])
                replays[dialect, start] = [seq for seq, _k, _p in frames]
        assert len({tuple(ids) for ids in replays.values()}) == 1, replays
        # gRPC has no ids: its subscription is the task as it stands, whole.
        async with grpc.aio.insecure_channel(agent.grpc_address) as channel:
            call = a2a_pb2_grpc.A2AServiceStub(channel).SubscribeToTask(
                a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=[("a2a-version", "1.0")]
            )
            first_event = await call.read()
            call.cancel()
        assert len(first_event.task.history) == history


async def test_a_cut_reader_and_a_live_one_see_no_gap_across_a_compaction(agent: Agent) -> None:
    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
        task_id, _ids = await _started(http, agent.writer)
        await _answer(http, agent.writer, task_id, 0)
        before = await _replay(http, agent.reader, task_id, "0")
        # A reader cut mid-replay, at the first event after the whole task.
        cut = before[1][0]
        # A live subscriber on the other replica while the next follow-up compacts the log.
        method, to, headers, body = _subscribe_call("jsonrpc-1.0", agent.reader, task_id, None)
        live: list[tuple[int, str]] = []
        async with (
            http.stream(method, to, headers=headers, json=body) as response,
            contextlib.aclosing(sse_frames(response)) as frames,
        ):
            snapshot = await anext(frames)
            assert _kind(snapshot[1]) == "task"
            await _answer(http, agent.writer, task_id, 1)
            async for event_id, payload in frames:
                assert event_id is not None and "error" not in payload, payload
                live.append((int(event_id), _kind(payload)))
                if _kind(payload) == "status_update" and "INPUT_REQUIRED" in str(payload):
                    break
        after = await _replay(http, agent.reader, task_id, str(cut))
        events, _bytes = agent.stored(task_id)
    assert live[0][1] == "task", live
    _rising([seq for seq, _kind in live])
    # The cut reader resumes at the whole task that replaced what it missed, then the rest,
    # exactly the live subscriber's events.
    assert [(seq, kind) for seq, kind, _p in after] == live, (after, live)
    assert events == len(live), (events, live)


async def test_streamed_artifacts_stay_whole_across_compactions(agent: Agent) -> None:
    """A streamed artifact's chunks live in the event log while its task runs (SQL); the
    whole task that replaces them carries them whole."""
    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
        task_id = ""
        for text in ("hello", "again", "bye"):
            body = _rpc("SendMessage", message=_message(text, task_id or None, "chat.on"))
            answer = (await http.post(agent.writer + "/", json=body, headers=H)).json()
            task_id = answer["result"]["task"]["id"]
        got = (
            await http.post(agent.reader + "/", json=_rpc("GetTask", id=task_id), headers=H)
        ).json()["result"]
    assert got["status"]["state"] == "TASK_STATE_COMPLETED"
    texts = [[part["data"]["text"] for part in a["parts"]] for a in got["artifacts"]]
    assert texts == [[f"{word}-{n}" for n in range(3)] for word in ("hello", "again", "bye")]
