"""Cluster mode's write path (storage/deferred.py) with two real replicas.

A blocking call's task is written once, whole: the database must then hold exactly the
rows the one-transaction-per-save path writes (version, task, one event per version, in
order), and everything the other replica does with a task must work as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from a2a.types.a2a_pb2 import StreamResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from apcore_a2a.storage import INTERRUPTED_MESSAGE
from apcore_a2a.storage.deferred import WRITE_DELAY

from .._postgres import store_url
from .._support import TLS, ServerProcess, cli_server, running_server
from ._a2a import EXTENSIONS
from .test_write_path_e2e import V1, _body, _count_writes, _sql, _writes

PROBES = str(Path(__file__).resolve().parent / "probes")
FAST = {
    "A2A_CLUSTER_POLL_INTERVAL": "0.1",
    "A2A_CLUSTER_HEARTBEAT_INTERVAL": "0.2",
    "A2A_CLUSTER_REPLICA_TIMEOUT": "1.5",
}


@pytest.fixture(params=["sqlite", "postgresql"])
def cluster_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path, agents=2) as url:
        yield url


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, str]]:
    """(store URL, replica A, replica B) of the examples, shared by this module's tests."""
    with contextlib.ExitStack() as stack:
        folder = tmp_path_factory.mktemp("cluster")
        url = stack.enter_context(store_url(request.param, folder, agents=2))
        # Push on: a message carrying a push config is refused by an agent without it.
        push = ["--push-notifications", "--push-allow-insecure-urls"]
        a, _ = stack.enter_context(_replica(url, extra=push))
        b, _ = stack.enter_context(_replica(url, extra=push))
        yield url, a, b


@contextlib.contextmanager
def _replica(
    url: str, extensions: str = EXTENSIONS, extra: tuple[str, ...] | list[str] = ()
) -> Iterator[tuple[str, ServerProcess]]:
    args = ["--extensions-dir", extensions, "--task-store", url, "--cluster", *extra]
    with cli_server([*args, "--log-level", "warning"], env=FAST) as replica:
        yield replica


def _rpc(method: str, **params: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 2, "method": method, "params": params}


async def _events(url: str, task_id: str) -> list[tuple[int, str]]:
    """(task_version, payload kind) of the task's event rows, in table order."""
    rows = await _sql(
        url, f"SELECT task_version, event_data FROM task_events WHERE task_id = '{task_id}' "
        "ORDER BY seq"
    )  # fmt: skip
    kinds = []
    for version, data in rows:
        response = StreamResponse()
        response.ParseFromString(bytes(data))  # type: ignore[arg-type]
        kinds.append((int(version), str(response.WhichOneof("payload"))))
    return kinds


async def test_a_blocking_call_is_written_once_with_every_version_and_event(
    pair: tuple[str, str, str],
) -> None:
    cluster_url, a, b = pair
    await _count_writes(cluster_url)
    async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:

        async def timed(i: int) -> tuple[dict[str, object], float]:
            start = time.monotonic()
            answer = await http.post(a + "/", json=_body("math.add", {"a": i, "b": 1000}))
            return answer.json()["result"]["task"], time.monotonic() - start

        # A call still running after WRITE_DELAY (a loaded machine) is rightly written
        # twice, its running state shared: only one answered within it is written once
        # for sure. On a machine too busy for any of eight at once, one at a time.
        timings = await asyncio.gather(*(timed(i) for i in range(8)))
        while not any(took < WRITE_DELAY for _, took in timings) and len(timings) < 30:
            timings.append(await timed(len(timings)))
        tasks = [task for task, _ in timings]
        fast = [str(task["id"]) for task, took in timings if took < WRITE_DELAY]
        assert fast, [took for _, took in timings]
        assert {t["status"]["state"] for t in tasks} == {"TASK_STATE_COMPLETED"}
        # The same call as a stream: nothing deferred, one transaction per save.
        streamed = await http.post(
            a + "/",
            json={**_body("math.add", {"a": 1, "b": 2}), "method": "SendStreamingMessage"},
        )
        first = next(line for line in streamed.text.splitlines() if line.startswith("data:"))
        streamed_id = json.loads(first[5:])["result"]["task"]["id"]
        writes = await _writes(cluster_url)
        # One write of each blocking task's row (the answer), none of its passing states.
        assert {key: writes[key] for key in fast} == dict.fromkeys(fast, 1)
        # A slower one (a loaded machine) is written at most once a second while it runs,
        # then its answer: never more often than that.
        for task, took in timings:
            seconds_running = int(took // WRITE_DELAY)
            assert writes[str(task["id"])] in range(1, seconds_running + 2), (took, writes)
        assert writes[streamed_id] > 1
        # Every version the one-save-per-transaction path makes, one event each, in order.
        reference = await _events(cluster_url, streamed_id)
        assert [v for v, _ in reference] == list(range(1, len(reference) + 1))
        for task in tasks:
            assert await _events(cluster_url, task["id"]) == reference
            version = await _sql(
                cluster_url,
                f"SELECT version FROM task_versions WHERE task_id = '{task['id']}'",
            )
            assert version == [(len(reference),)]
            # Replica B reads it as answered on A.
            got = (await http.post(b + "/", json=_rpc("GetTask", id=task["id"]))).json()
            assert got["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
            assert got["result"]["artifacts"] == task["artifacts"]
        # No claim is left behind for a task that never ran in the database (a slower one,
        # written while it ran, keeps its claim row: Replicas.release leaves it, harmless).
        claims = await _sql(cluster_url, "SELECT task_id FROM apcore_a2a_task_claims")
        assert not {str(r[0]) for r in claims} & set(fast)


async def _running_id(url: str, within: float) -> str:
    """The id of the one unfinished task the database holds, once it holds one."""
    deadline = time.monotonic() + within
    query = "SELECT id, status FROM tasks"
    while time.monotonic() < deadline:
        rows = [r for r in await _sql(url, query) if "COMPLETED" not in str(r[1])]
        if rows:
            return str(rows[0][0])
        await asyncio.sleep(0.05)
    raise AssertionError(f"no task was written within {within} s")


async def test_a_long_blocking_call_is_shared_after_the_delay_and_canceled_from_b(
    cluster_url: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.txt"
    with _replica(cluster_url, PROBES) as (a, _), _replica(cluster_url, PROBES) as (b, _):
        async with httpx.AsyncClient(headers=V1, timeout=120, verify=TLS) as http:
            work = {"journal": str(journal), "seconds": 300}
            started = time.monotonic()
            call = asyncio.ensure_future(http.post(a + "/", json=_body("probe.work", work)))
            task_id = await _running_id(cluster_url, WRITE_DELAY + 20)
            # Kept in memory for the delay, then written with its claim and versions. A
            # bound from below (a busy machine only adds time): the write was deferred.
            assert time.monotonic() - started >= WRITE_DELAY * 0.9
            claims = await _sql(
                cluster_url, f"SELECT task_id FROM apcore_a2a_task_claims WHERE task_id = '{task_id}'"
            )  # fmt: skip
            assert claims == [(task_id,)]
            kept = await _events(cluster_url, task_id)
            assert [v for v, _ in kept] == list(range(1, len(kept) + 1))
            seen = (await http.post(b + "/", json=_rpc("GetTask", id=task_id))).json()
            assert seen["result"]["status"]["state"] == "TASK_STATE_WORKING"
            canceled = (await http.post(b + "/", json=_rpc("CancelTask", id=task_id))).json()
            assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
            answer = (await asyncio.wait_for(call, 60)).json()
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_CANCELED"
            after = await _events(cluster_url, task_id)
            assert after[: len(kept)] == kept
            assert [v for v, _ in after] == list(range(1, len(after) + 1))


async def test_a_blocking_call_with_a_push_config_is_stored_before_its_webhook_hears_of_it(
    pair: tuple[str, str, str],
) -> None:
    """The webhook learns the task's id from the first event: replica B must find the task
    then, not WRITE_DELAY later. Judged by order (B is asked from inside the webhook's first
    delivery), not by a clock: a slow machine delays the delivery, never fails the test."""
    _, a, b = pair
    seen: list[dict[str, object]] = []
    async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:

        async def hook(request: Request) -> Response:
            event = json.loads(await request.body())
            if not seen:
                kinds = [v for v in event.values() if isinstance(v, dict)]
                task_id = next(str(v.get("taskId") or v.get("id")) for v in kinds)
                seen.append((await http.post(b + "/", json=_rpc("GetTask", id=task_id))).json())
            return Response(status_code=204)

        hooks = Starlette(routes=[Route("/hook", hook, methods=["POST"])])
        async with running_server(hooks) as base:
            push = {"url": base + "/hook", "token": "t"}
            # Longer than WRITE_DELAY: a deferred write would come too late for the hook.
            body = _body("jobs.sleep", {"seconds": 3}, taskPushNotificationConfig=push)
            answer = (await http.post(a + "/", json=body)).json()
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert seen, "the webhook heard of no event"
    assert "result" in seen[0], seen[0]
    assert seen[0]["result"]["id"] == answer["result"]["task"]["id"]  # type: ignore[index]


async def test_a_long_blocking_call_on_a_killed_replica_is_closed_out_by_the_other(
    cluster_url: str,
) -> None:
    with _replica(cluster_url) as (b, _):
        with _replica(cluster_url) as (a, proc_a):
            async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
                call = asyncio.ensure_future(
                    http.post(a + "/", json=_body("jobs.sleep", {"seconds": 120}))
                )
                task_id = await _running_id(cluster_url, WRITE_DELAY + 20)
                proc_a.kill9()
                with pytest.raises(httpx.HTTPError):
                    await call
        async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
            deadline = time.monotonic() + 30
            while True:
                got = (await http.post(b + "/", json=_rpc("GetTask", id=task_id))).json()
                status = got["result"]["status"]
                if status["state"] != "TASK_STATE_WORKING" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
    assert status["state"] == "TASK_STATE_FAILED"
    assert status["message"]["parts"][0]["text"] == INTERRUPTED_MESSAGE
    assert Counter(kind for _, kind in await _events(cluster_url, task_id))["status_update"] >= 1
