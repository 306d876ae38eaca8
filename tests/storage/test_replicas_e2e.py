"""Two real server processes on one database: tasks, cancels, streams and resumes are shared.

Each scenario starts on replica A and continues on replica B through the official
a2a-sdk client, on PostgreSQL and on one SQLite file.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)

from tests._sdk import request

from .._postgres import pg_schema_url
from .._support import ServerProcess, cli_server, stop_process
from ._a2a import EXTENSIONS, client, send

POLL = "0.1"
#: test-only modules (``probe.work`` journals what happens to it)
PROBES = str(Path(__file__).resolve().parent / "probes")
#: how long a replica may drain running tasks after SIGTERM in the cancel test
SHUTDOWN_TIMEOUT = 10.0
#: how long a cancel may take to reach the module on the other replica
CANCEL_REACH = 20.0
#: a record at WARNING or above in a replica's log (``%(asctime)s %(levelname)s ...``)
_LOUD = re.compile(r"^\S+ \S+ (WARNING|ERROR|CRITICAL) ")


@contextlib.contextmanager
def _pair(
    backend: str, folder: Path, *extra: str, extensions: str = EXTENSIONS
) -> Iterator[tuple[tuple[str, ServerProcess], tuple[str, ServerProcess]]]:
    """Two cluster replicas on one fresh store: ((url A, process A), (url B, process B))."""
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            url = f"sqlite:///{folder / 'tasks.db'}"
        else:
            url = stack.enter_context(pg_schema_url(agents=2))
        args = ["--extensions-dir", extensions, "--task-store", url, "--cluster", *extra]
        env = {"A2A_CLUSTER_POLL_INTERVAL": POLL}
        a = stack.enter_context(cli_server(args, env=env))
        b = stack.enter_context(cli_server(args, env=env))
        yield a, b


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def replicas(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """Replicas A and B (base URLs), shared by this module's tests per backend."""
    with _pair(request.param, tmp_path_factory.mktemp("replicas")) as ((a, _pa), (b, _pb)):
        yield a, b


async def _journal_says(journal: Path, word: str, within: float) -> bool:
    """Whether the probe module wrote *word* to its journal within *within* seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if journal.exists() and word in journal.read_text().split():
            return True
        await asyncio.sleep(0.05)
    return False


async def test_task_from_a_is_fetched_and_listed_on_b(replicas: tuple[str, str]) -> None:
    a, b = replicas
    ca, cb = await client(a), await client(b)
    task = await send(ca, request("math.add", {"a": 2, "b": 40}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    fetched = await cb.get_task(GetTaskRequest(id=task.id))
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    assert fetched.artifacts == task.artifacts
    listed = await cb.list_tasks(ListTasksRequest(context_id=task.context_id))
    assert [t.id for t in listed.tasks] == [task.id]


async def _cancel_stops_the_module_on_a(backend: str, canceller: str, tmp_path: Path) -> None:
    """A task runs ``probe.work`` on replica A; *canceller* ("A" or "B") cancels it."""
    journal = tmp_path / "journal.txt"
    extra = ("--shutdown-timeout", str(SHUTDOWN_TIMEOUT))
    with _pair(backend, tmp_path, *extra, extensions=PROBES) as ((a, proc_a), (b, _proc_b)):
        ca, cb = await client(a), await client(b)
        work = {"journal": str(journal), "seconds": 300}
        started = await send(ca, request("probe.work", work, return_immediately=True))
        assert await _journal_says(journal, "started", 30), "the module never started on A"
        canceled = await {"A": ca, "B": cb}[canceller].cancel_task(CancelTaskRequest(id=started.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        for c in (ca, cb):
            again = await c.get_task(GetTaskRequest(id=started.id))
            assert again.status.state == TaskState.TASK_STATE_CANCELED
        # The module itself saw the cancel on A: it stopped working, it did not finish.
        reached = await _journal_says(journal, "canceled", CANCEL_REACH)
        # Nothing runs on A any more, so it stops at once: exit 0 within its shutdown
        # timeout (a module still running would hold the drain until then, and past it
        # the harness SIGKILLs A).
        try:
            stop_process(proc_a, timeout=SHUTDOWN_TIMEOUT)
            stopped = "A exited 0 after SIGTERM"
        except pytest.fail.Exception as failure:
            stopped = str(failure)
        seen = "saw" if reached else "did NOT see"
        assert reached and stopped == "A exited 0 after SIGTERM", (
            f"after CancelTask on {canceller}, the module running on A {seen} the cancel "
            f"within {CANCEL_REACH}s (its journal: {journal.read_text()!r}); {stopped}"
        )
        assert "finished" not in journal.read_text().split()
        # A clean cancel: A's own log (its process's output) holds no warning of it.
        noise = [line for line in proc_a.output().splitlines() if _LOUD.search(line)]
        assert noise == [], noise


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_cancel_on_b_stops_a_task_running_on_a(backend: str, tmp_path: Path) -> None:
    await _cancel_stops_the_module_on_a(backend, "B", tmp_path)


async def test_cancel_on_a_stops_its_own_task(tmp_path: Path) -> None:
    """The control for the test above: the same oracle, the cancel sent where it runs."""
    await _cancel_stops_the_module_on_a("sqlite", "A", tmp_path)


async def test_b_streams_live_events_of_a_task_running_on_a(replicas: tuple[str, str]) -> None:
    a, b = replicas
    ca = await client(a)
    sb = await client(b, streaming=True)
    started = await send(
        ca, request("text.countdown", {"start": 5, "delay": 0.3}, return_immediately=True)
    )
    kinds: list[str] = []
    remaining: list[float] = []
    final = None
    deadline = time.monotonic() + 20
    async for response in sb.subscribe(SubscribeToTaskRequest(id=started.id)):
        kind = response.WhichOneof("payload")
        kinds.append(kind or "")
        if kind == "artifact_update":
            for part in response.artifact_update.artifact.parts:
                value = part.data.struct_value.fields.get("remaining")
                if value is not None:
                    remaining.append(value.number_value)
        if kind == "status_update":
            final = response.status_update.status.state
        assert time.monotonic() < deadline
    assert kinds[0] == "task"
    assert "artifact_update" in kinds
    assert final == TaskState.TASK_STATE_COMPLETED
    # B relayed A's chunks as they happened, not one snapshot at the end.
    assert len(remaining) >= 2
    assert remaining[-1] == 0


async def test_input_required_on_a_is_resumed_on_b_with_only_the_task_id(
    replicas: tuple[str, str],
) -> None:
    a, b = replicas
    ca, cb = await client(a), await client(b)
    parked = await send(ca, request("bank.transfer", {"to": "acct-9", "amount": 500}))
    assert parked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    # No contextId: B must take it from the stored task.
    done = await send(cb, request(None, text="approve", task_id=parked.id))
    assert done.id == parked.id
    assert done.context_id == parked.context_id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    seen_on_a = await ca.get_task(GetTaskRequest(id=parked.id))
    assert seen_on_a.status.state == TaskState.TASK_STATE_COMPLETED


async def test_many_tasks_across_both_replicas_are_all_visible_on_each(
    replicas: tuple[str, str],
) -> None:
    a, b = replicas
    ca, cb = await client(a), await client(b)
    tasks = await asyncio.gather(
        *(send(c, request("math.add", {"a": i, "b": 1})) for i, c in enumerate([ca, cb] * 10))
    )
    ids = {t.id for t in tasks}
    for c in (ca, cb):
        page = await c.list_tasks(ListTasksRequest(page_size=100))
        assert ids <= {t.id for t in page.tasks}
        assert page.total_size >= len(ids)
