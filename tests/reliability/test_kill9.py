"""kill -9 under a mixed load on SQLite: nothing acknowledged is lost, nothing stays running.

The agent runs in its own process on a SQLite file. Workers mix blocking sends, sends
that return at once (some of them canceled), and approvals parked in input-required.
Every answer the client saw is written down; at ~300 acknowledgements the process gets
SIGKILL (no shutdown hook runs). After a restart on the same file:

* every acknowledged terminal task is there, in the state the client saw;
* no task is ``submitted``/``working`` (the restart failed them with a reason);
* parked approvals are still ``input-required``, and approving one completes it.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import httpx

from apcore_a2a.storage import INTERRUPTED_MESSAGE

from .._support import TLS, free_port
from . import _report
from ._load import TERMINAL, call, message, send
from ._oracle import Oracle
from ._serve import agent_process

WORKERS = 12
KILL_AT = 300
TALLY = _report.tally("fault: kill -9 on SQLite")


async def test_kill_9_under_mixed_load_loses_nothing(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    port = free_port()
    seen: dict[str, str] = {}  # task id -> state the client was told
    killed = asyncio.Event()
    counter = itertools.count()

    with agent_process(port=port, task_store=store) as served:
        async with httpx.AsyncClient(base_url=served.url, timeout=30, verify=TLS) as http:

            async def one(n: int) -> None:
                kind = n % 6
                if kind in (0, 1, 2):
                    task = await send(http, message("rel.nap", {"seconds": 0.01}))
                    seen[task["id"]] = task["status"]["state"]
                elif kind == 3:
                    task = await send(
                        http, message("rel.nap", {"seconds": 0.5}), return_immediately=True
                    )
                    seen.setdefault(task["id"], task["status"]["state"])
                elif kind == 4:
                    task = await send(
                        http, message("rel.nap", {"seconds": 5}), return_immediately=True
                    )
                    reply = await call(http, "CancelTask", {"id": task["id"]})
                    if "error" in reply:
                        # Only a task that ended first (its 5 s on a loaded machine) may
                        # refuse its cancel; what it ended as is what the client saw.
                        assert reply["error"]["code"] == -32002, reply
                        reply = await call(http, "GetTask", {"id": task["id"]})
                    seen[task["id"]] = reply["result"]["status"]["state"]
                else:
                    task = await send(http, message("rel.transfer", {"to": "bob", "amount": n + 1}))
                    seen[task["id"]] = task["status"]["state"]

            async def worker() -> None:
                while not killed.is_set():
                    try:
                        await one(next(counter))
                    except (httpx.HTTPError, AssertionError):
                        if not killed.is_set():
                            raise  # a wrong answer from a live agent is a failure
                        return  # the agent died under us: that answer never came
                    if sum(s in TERMINAL for s in seen.values()) >= KILL_AT and not killed.is_set():
                        served.proc.kill9()
                        killed.set()

            await asyncio.gather(*(worker() for _ in range(WORKERS)))
        served.proc.wait()
        assert served.proc.returncode == -9

    acked_terminal = {i: s for i, s in seen.items() if s in TERMINAL}
    parked = [i for i, s in seen.items() if s == "TASK_STATE_INPUT_REQUIRED"]
    assert len(acked_terminal) >= KILL_AT and parked

    with agent_process(port=port, task_store=store) as served:
        async with httpx.AsyncClient(base_url=served.url, timeout=30, verify=TLS) as http:
            stored: dict[str, dict[str, object]] = {}
            token = ""
            while True:
                params: dict[str, object] = {"pageSize": 100}
                if token:
                    params["pageToken"] = token
                page = (await call(http, "ListTasks", params))["result"]
                stored.update({t["id"]: t for t in page.get("tasks", [])})
                token = page.get("nextPageToken", "")
                if not token:
                    break
            states = {i: t["status"]["state"] for i, t in stored.items()}  # type: ignore[index]
            lost = [i for i, s in acked_terminal.items() if states.get(i) != s]
            running = [
                i for i, s in states.items() if s in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
            ]
            interrupted = [
                i
                for i, t in stored.items()
                if t["status"].get("message", {}).get("parts", [{}])[0].get("text")
                == INTERRUPTED_MESSAGE
            ]  # type: ignore[index, union-attr]
            still_parked = [i for i in parked if states.get(i) == "TASK_STATE_INPUT_REQUIRED"]

            # An approval given after the restart of a durable store is honoured: the task
            # resumes and completes (docs/reliability.md).
            oracle = Oracle(TALLY)
            answer = await http.post(
                "/",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {"message": message(None, {"approved": True}, task_id=parked[0])},
                },
                headers={"A2A-Version": "1.0"},
            )
            reply = oracle.check(answer)
            after = (
                reply["result"]["task"]["status"]["state"]
                if "result" in reply
                else f"error {reply['error']['code']}"
            )

    TALLY.cases += len(seen)
    TALLY.lost_tasks = len(lost)
    TALLY.notes.append(
        f"acknowledged terminal {len(acked_terminal)}, stored {len(stored)}, failed at restart "
        f"{len(interrupted)}, parked kept {len(still_parked)}/{len(parked)}, approval after restart -> {after}"
    )
    assert not lost, f"{len(lost)} acknowledged tasks lost or changed: {lost[:5]}"
    assert not running, f"{len(running)} tasks still running after restart"
    assert all(states[i] == "TASK_STATE_FAILED" for i in interrupted)
    assert still_parked == [i for i in parked if i in states], "parked approvals changed state"
    assert after == "TASK_STATE_COMPLETED", reply
