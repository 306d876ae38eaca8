"""Long streamed outputs in cluster mode: stored once, readable everywhere, never lost.

``probe.chunks`` streams numbered text chunks from replica A. While it runs, B shows every
chunk stored so far (``GetTask``, ``ListTasks``); the store grows with the output, not
with its square; a replica killed mid-stream loses no chunk a client saw, and the stream
goes on from B with ``Last-Event-ID``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apcore_a2a.storage import INTERRUPTED_MESSAGE

from .._postgres import pg_schema_url
from .._support import ServerProcess, cli_server, sse_frames
from .test_cluster_write_path_e2e import FAST, _rpc
from .test_write_path_e2e import V1, _body, _sql

PROBES = str(Path(__file__).resolve().parent / "probes")


@contextlib.contextmanager
def _replica(url: str) -> Iterator[tuple[str, ServerProcess]]:
    args = ["--extensions-dir", PROBES, "--task-store", url, "--cluster", "--log-level", "warning"]
    with cli_server(args, env=FAST) as replica:
        yield replica


@pytest.fixture(params=["sqlite", "postgresql"])
def cluster_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.db'}"
    else:
        with pg_schema_url(agents=2) as url:
            yield url


def _stream_body(count: int, size: int, delay: float) -> dict[str, Any]:
    body = _body("probe.chunks", {"count": count, "size": size, "delay": delay})
    body["method"] = "SendStreamingMessage"
    return body


def _texts(task: dict[str, Any]) -> list[str]:
    """The text parts of the task's one artifact (none yet: empty)."""
    artifacts = task.get("artifacts", [])
    return [part["text"] for part in artifacts[0]["parts"]] if artifacts else []


async def _get(http: httpx.AsyncClient, base: str, task_id: str) -> dict[str, Any]:
    reply = (await http.post(base + "/", json=_rpc("GetTask", id=task_id))).json()
    return dict(reply["result"])


async def test_the_other_replica_shows_every_chunk_stored_so_far(cluster_url: str) -> None:
    with _replica(cluster_url) as (a, _), _replica(cluster_url) as (b, _):
        async with httpx.AsyncClient(headers=V1, timeout=60) as http:
            seen: list[str] = []
            task_id, final = "", None
            body = _stream_body(count=40, size=64, delay=0.02)
            async with http.stream("POST", a + "/", json=body) as response:
                async for _id, payload in sse_frames(response):
                    result = payload["result"]
                    if "task" in result:
                        task_id = result["task"]["id"]
                    elif "artifactUpdate" in result:
                        seen += [p["text"] for p in result["artifactUpdate"]["artifact"]["parts"]]
                        if len(seen) % 10 == 0:
                            # Every chunk a client got is stored: B shows at least those.
                            task = await _get(http, b, task_id)
                            assert _texts(task)[: len(seen)] == seen
                            listed = await http.post(
                                b + "/", json=_rpc("ListTasks", includeArtifacts=True)
                            )
                            [entry] = listed.json()["result"]["tasks"]
                            assert _texts(entry)[: len(seen)] == seen
                            assert "metadata" not in entry["artifacts"][0]
                    elif "statusUpdate" in result:
                        final = result["statusUpdate"]["status"]
            assert len(seen) == 40 and [t[:6] for t in seen] == [f"{n:06d}" for n in range(40)]
            assert final is not None and final["state"] == "TASK_STATE_COMPLETED"
            # The text is in the artifact: the final status does not send it again.
            assert "message" not in final
            for base in (a, b):
                task = await _get(http, base, task_id)
                assert task["status"]["state"] == "TASK_STATE_COMPLETED"
                assert _texts(task) == seen
                assert "metadata" not in task["artifacts"][0]


async def test_a_streamed_output_is_stored_about_twice_not_once_per_chunk() -> None:
    with pg_schema_url() as url, _replica(url) as (a, _):
        tables = "pg_total_relation_size('tasks') + pg_total_relation_size('task_events')"
        [(before,)] = await _sql(url, f"SELECT {tables}")
        async with httpx.AsyncClient(headers=V1, timeout=120) as http:
            output = 0
            body = _stream_body(count=100, size=4096, delay=0.0)
            async with http.stream("POST", a + "/", json=body) as response:
                async for _id, payload in sse_frames(response):
                    update = payload["result"].get("artifactUpdate")
                    output += (
                        sum(len(p["text"]) for p in update["artifact"]["parts"]) if update else 0
                    )
        [(after,)] = await _sql(url, f"SELECT {tables}")
    assert output == 100 * 4096
    # The chunks once as events, once in the finished row (TOAST pages round up): each
    # chunk rewriting the whole artifact stored 50 times the output here.
    assert int(after) - int(before) < 4 * output  # type: ignore[call-overload]


async def test_kill_9_mid_stream_loses_no_chunk_and_the_stream_goes_on_elsewhere() -> None:
    with pg_schema_url(agents=2) as url, _replica(url) as (b, _):
        seen: list[str] = []
        last_id, task_id = "", ""
        with _replica(url) as (a, proc_a):
            async with httpx.AsyncClient(headers=V1, timeout=60) as http:
                body = _stream_body(count=2000, size=256, delay=0.01)
                async with http.stream("POST", a + "/", json=body) as response:
                    async for event_id, payload in sse_frames(response):
                        result = payload["result"]
                        task_id = result["task"]["id"] if "task" in result else task_id
                        update = result.get("artifactUpdate")
                        if update:
                            seen += [p["text"] for p in update["artifact"]["parts"]]
                        last_id = event_id or last_id
                        if len(seen) >= 150:
                            proc_a.kill9()  # mid-stream, without any shutdown hook
                            break
        async with httpx.AsyncClient(headers=V1, timeout=60) as http:
            # B has every chunk the client saw, in order, right away.
            assert _texts(await _get(http, b, task_id))[: len(seen)] == seen
            # The stream goes on from B after the last id: what A stored after it, then the
            # end B's recovery gives the task of a dead replica.
            rest: list[str] = []
            final = None
            body = _rpc("SubscribeToTask", id=task_id)
            headers = {"Last-Event-ID": last_id}
            async with http.stream("POST", b + "/", json=body, headers=headers) as response:
                async for _id, payload in sse_frames(response):
                    result = payload["result"]
                    update = result.get("artifactUpdate")
                    rest += [p["text"] for p in update["artifact"]["parts"]] if update else []
                    if "statusUpdate" in result:
                        final = result["statusUpdate"]["status"]
            # It ends (the client's read timeout is the hang guard) with B's verdict.
            assert final is not None and final["state"] == "TASK_STATE_FAILED"
            assert final["message"]["parts"][0]["text"] == INTERRUPTED_MESSAGE
            whole = seen + rest
            assert [t[:6] for t in whole] == [f"{n:06d}" for n in range(len(whole))]
            stored = await _get(http, b, task_id)
            assert stored["status"]["state"] == "TASK_STATE_FAILED"
            assert _texts(stored) == whole
