"""kill -9 under load on SQLite: acknowledged results survive, nothing is left running."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from a2a.types import ListTasksRequest, Task, TaskState

from apcore_a2a.storage import INTERRUPTED_MESSAGE
from tests._sdk import request

from .._support import cli_server
from ._a2a import EXTENSIONS, client, send

TOTAL = 500
CONCURRENCY = 16
KILL_AFTER = 200


async def all_tasks(base_url: str) -> list[Task]:
    c = await client(base_url)
    tasks: list[Task] = []
    token = ""
    while True:
        page = await c.list_tasks(
            ListTasksRequest(page_size=100, page_token=token, include_artifacts=True)
        )
        tasks.extend(page.tasks)
        token = page.next_page_token
        if not token:
            return tasks


async def test_kill_9_during_500_tasks_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    args = ["--extensions-dir", EXTENSIONS, "--task-store", url]
    message_ids = [uuid.uuid4().hex for _ in range(TOTAL)]
    acked: dict[str, Task] = {}
    in_flight_at_kill = 0
    with cli_server(args) as (base, proc):
        c = await client(base)
        queue = list(reversed(message_ids))
        in_flight = 0
        killed = asyncio.Event()

        async def worker() -> None:
            nonlocal in_flight, in_flight_at_kill
            while queue and not killed.is_set():
                mid = queue.pop()
                in_flight += 1
                try:
                    task = await send(c, request("jobs.sleep", {"seconds": 0.02}, message_id=mid))
                except Exception:
                    if not killed.is_set():
                        raise  # a live server must answer every request
                    continue  # the server died under us: not acknowledged
                finally:
                    in_flight -= 1
                if task.status.state == TaskState.TASK_STATE_COMPLETED and not killed.is_set():
                    acked[mid] = task
                if len(acked) >= KILL_AFTER and not killed.is_set():
                    in_flight_at_kill = in_flight
                    proc.kill9()  # SIGKILL on purpose: no shutdown hooks run
                    killed.set()

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        proc.wait()
        assert killed.is_set()

    with cli_server(args) as (base, _):
        stored = await all_tasks(base)

    by_message = {t.history[0].message_id: t for t in stored}
    completed = {
        mid for mid, t in by_message.items() if t.status.state == TaskState.TASK_STATE_COMPLETED
    }
    # Every result a client saw is there, unchanged.
    for mid, seen in acked.items():
        assert mid in completed, f"acknowledged task {seen.id} lost or changed state"
        assert by_message[mid].artifacts == seen.artifacts
    # Tasks that completed while their response was on the wire can only be among
    # the requests in flight at the kill.
    assert len(completed) - len(acked) <= in_flight_at_kill <= CONCURRENCY
    # Nothing hangs: whatever did not complete was failed at restart, with a reason.
    for t in stored:
        assert t.status.state in (TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED)
        if t.status.state == TaskState.TASK_STATE_FAILED:
            assert t.status.message.parts[0].text == INTERRUPTED_MESSAGE
    print(
        f"acked={len(acked)} completed={len(completed)} stored={len(stored)} "
        f"interrupted={len(stored) - len(completed)} in_flight_at_kill={in_flight_at_kill}"
    )
