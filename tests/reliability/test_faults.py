"""Faults around the tasks: a push receiver that is down, a module that hangs."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from apcore_a2a import A2AServerFactory

from .._support import TLS, free_port, running_server
from . import _report
from ._load import call, message, send, wait_all_terminal
from ._modules import Controls, build_executor

PUSHED = 40
TALLY_PUSH = _report.tally("fault: push receiver down")
TALLY_HANG = _report.tally("fault: hanging module")


async def test_push_receiver_down_retries_then_fails_the_config_and_tasks_are_unaffected() -> None:
    dead = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    port = free_port()
    app, _ = A2AServerFactory(
        build_executor(),
        environ={},
        port=port,
        push_notifications=True,
        push_allow_insecure_urls=True,
        push_retry_delays=(0.05, 0.1),
    ).create()
    async with (
        running_server(app, port=port) as url,
        httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http,
    ):
        started = time.monotonic()

        async def one(i: int) -> dict[str, object]:
            params = {
                "message": message("rel.add", {"a": i, "b": 1}),
                "configuration": {"taskPushNotificationConfig": {"id": f"c{i}", "url": dead}},
            }
            reply = await call(http, "SendMessage", params)
            return reply["result"]["task"]  # type: ignore[no-any-return]

        tasks = await asyncio.gather(*(one(i) for i in range(PUSHED)))
        elapsed = time.monotonic() - started
        # Tasks finish on their own time: delivery is queued, not awaited.
        assert [t["status"]["state"] for t in tasks] == ["TASK_STATE_COMPLETED"] * PUSHED  # type: ignore[index]
        assert [t["artifacts"][0]["parts"][0]["data"]["sum"] for t in tasks] == [
            i + 1 for i in range(PUSHED)
        ]  # type: ignore[index]

        sender = app.state.a2a.extras["push"].sender
        await asyncio.wait_for(sender.idle(), 30)
        answers = await asyncio.gather(*(http.get(f"/push/status/{t['id']}") for t in tasks))
        configs = [c for a in answers for c in a.json()["configs"]]
        assert [c["id"] for c in configs] == [f"c{i}" for i in range(len(tasks))]
        statuses = {c["status"] for c in configs}
        reasons = {c["statusReason"] for c in configs}
        assert statuses == {"failed"}
        assert reasons == {"connection error: ConnectError (after 3 attempts)"}
        assert sender.retried >= 2 * PUSHED and sender.sent == 0
        # The agent keeps serving, and a task without push is untouched by the dead hook.
        later = await send(http, message("rel.add", {"a": 2, "b": 2}))
        assert later["status"]["state"] == "TASK_STATE_COMPLETED"
        assert (await http.get("/health")).status_code == 200
    TALLY_PUSH.cases += PUSHED
    TALLY_PUSH.lost_tasks = 0
    TALLY_PUSH.notes.append(
        f"{PUSHED} tasks completed in {elapsed:.2f}s with a dead hook; retried {sender.retried}, failed {sender.failed}"
    )


@pytest.mark.parametrize("workers", [4])
async def test_hanging_module_times_out_and_the_pool_serves_the_rest(workers: int) -> None:
    controls = Controls()
    port = free_port()
    # Served as serve() serves it: process_tuning sizes the loop's pool to sync_workers.
    app, _ = A2AServerFactory(
        build_executor(controls),
        environ={},
        port=port,
        execution_timeout=0.5,
        sync_workers=workers,
        sync_workers_per_caller=workers,  # one caller here: it may hang every thread
        process_tuning=True,
    ).create()
    try:
        async with (
            running_server(app, port=port) as url,
            httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http,
        ):
            # Two hung threads out of four: the timeout ends their tasks (the module holds
            # its thread until the test releases it, so only the timeout can answer), and
            # the rest still runs.
            hung = await asyncio.gather(
                *(send(http, message("rel.hang", {})) for _ in range(workers // 2))
            )
            assert not controls.hang.is_set()
            for task in hung:
                assert task["status"]["state"] == "TASK_STATE_FAILED"
                assert task["status"]["message"]["parts"][0]["text"] == "Execution timed out"
            # One at a time: twenty at once on the two free threads could wait past the
            # half-second timeout on a loaded machine (and be refused for it).
            quick = [await send(http, message("rel.add", {"a": i, "b": i})) for i in range(20)]
            assert [t["artifacts"][0]["parts"][0]["data"]["sum"] for t in quick] == [
                2 * i for i in range(20)
            ]

            # Every worker thread hung: sync modules wait for a thread, async ones do not.
            more = await asyncio.gather(
                *(send(http, message("rel.hang", {})) for _ in range(workers - workers // 2))
            )
            assert {t["status"]["state"] for t in more} == {"TASK_STATE_FAILED"}
            assert controls.hung == workers
            waiting = await send(
                http, message("rel.add", {"a": 1, "b": 1}), return_immediately=True
            )
            echo = await send(http, message("rel.echo", {"text": "still here"}))
            assert echo["status"]["state"] == "TASK_STATE_COMPLETED"
            assert (await http.get("/health")).status_code == 200
            # The sync call never gets a thread: its execution timeout ends its wait, and it
            # is refused without running, a refusal its caller may retry (docs/lifecycle.md).
            timed_out = await wait_all_terminal(http, [waiting["id"]], timeout=30)
            assert timed_out[waiting["id"]]["status"]["state"] == "TASK_STATE_REJECTED"
            text = timed_out[waiting["id"]]["status"]["message"]["parts"][0]["text"]
            assert text.startswith("No sync worker thread came free for this call"), text

            # Once the module lets go, late results change nothing.
            controls.hang.set()
            final = await wait_all_terminal(
                http, [waiting["id"], *(t["id"] for t in hung + more)], timeout=30
            )
            ids = [waiting["id"], *(t["id"] for t in hung + more)]
            states = [final[i]["status"]["state"] for i in ids]
            assert states == ["TASK_STATE_REJECTED"] + ["TASK_STATE_FAILED"] * (len(ids) - 1)
            after = await send(http, message("rel.add", {"a": 2, "b": 2}))  # threads are free
            assert after["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        controls.hang.set()
    TALLY_HANG.cases += 2 * workers + 22
    TALLY_HANG.notes.append(
        f"timeouts ended hung calls; with all {workers} sync workers hung, async skills and "
        "/health kept answering, a sync call waiting for a thread was refused without running"
    )
