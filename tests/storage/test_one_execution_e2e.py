"""At most one execution per task, on a real server and across two PostgreSQL replicas.

* 50 approvals of one parked payment sent at once over JSON-RPC, REST and gRPC
  (alternating between the replicas):
  exactly one resumes it, the module runs once, the other 49 are refused
  (``TaskBusyError`` while it runs, -32004 once it has finished).
* A message for a task that is still running is refused at once (JSON-RPC -32090,
  REST 409, gRPC FAILED_PRECONDITION), not queued behind it.
* A finished task stays finished: cancel answers -32002 and the task is unchanged.

The tests share one deployment per backend (``deployments``), each on tasks of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client.errors import A2AClientError
from a2a.types import TaskState
from a2a.utils.errors import A2AError

from tests._sdk import make_client, request

from .._postgres import pg_schema_url
from .._support import TLS, cli_server, free_port
from .test_replicas_e2e import PROBES

V10 = {"A2A-Version": "1.0"}


@contextlib.contextmanager
def _deployment(backend: str) -> Iterator[list[str]]:
    """Base URLs: one memory-store server, or two cluster replicas on PostgreSQL (gRPC on
    the first)."""
    with contextlib.ExitStack() as stack:
        args = ["--extensions-dir", PROBES]
        grpc_args = ["--grpc-port", str(free_port())]
        if backend == "memory":
            url, _ = stack.enter_context(cli_server([*args, *grpc_args]))
            yield [url]
            return
        store = stack.enter_context(pg_schema_url(agents=2))
        args += ["--task-store", store, "--cluster"]
        a, _ = stack.enter_context(cli_server([*args, *grpc_args]))
        b, _ = stack.enter_context(cli_server(args))
        yield [a, b]


@pytest.fixture(scope="module")
def deployments() -> Iterator[Callable[[str], list[str]]]:
    """A backend's deployment, started on first use and shared by this file's tests: each
    works on tasks and a journal of its own, and a start costs more than most tests."""
    started: dict[str, list[str]] = {}
    with contextlib.ExitStack() as stack:

        def get(backend: str) -> list[str]:
            if backend not in started:
                started[backend] = stack.enter_context(_deployment(backend))
            return started[backend]

        yield get


def _message(skill: str | None, data: dict[str, Any], task_id: str = "") -> dict[str, Any]:
    msg: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": data}],
    }
    if skill:
        msg["metadata"] = {"skillId": skill}
    if task_id:
        msg["taskId"] = task_id
    return msg


async def _rpc(http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
    response = await http.post(url + "/", json=body, headers=V10)
    assert response.status_code == 200, response.text
    return response.json()


def _state(payload: dict[str, Any]) -> str:
    return str(payload["result"]["task"]["status"]["state"])


async def _journal_lines(journal: Path, word: str) -> list[str]:
    if not journal.exists():
        return []
    return [line for line in journal.read_text().splitlines() if line.startswith(word)]


@pytest.mark.parametrize("backend", ["memory", "postgresql"])
async def test_fifty_concurrent_approvals_run_the_payment_once(
    backend: str, tmp_path: Path, deployments: Callable[[str], list[str]]
) -> None:
    journal = tmp_path / "journal.txt"
    urls = deployments(backend)
    async with httpx.AsyncClient(
        timeout=120, limits=httpx.Limits(max_connections=60), verify=TLS
    ) as http:
        parked = await _rpc(
            http,
            urls[0],
            "SendMessage",
            {"message": _message("probe.pay", {"journal": str(journal), "amount": 500})},
        )
        assert _state(parked) == "TASK_STATE_INPUT_REQUIRED", parked
        task_id = parked["result"]["task"]["id"]
        approve = {"message": _message(None, {"approved": True}, task_id)}
        grpc_client = await make_client(urls[0], "GRPC", "1.0")

        async def over_jsonrpc(url: str) -> str:
            answer = await _rpc(http, url, "SendMessage", approve)
            if "result" in answer:
                return _state(answer)
            return f"refused {answer['error']['code']}"

        async def over_rest(url: str) -> str:
            answer = await http.post(url + "/message:send", json=approve, headers=V10)
            if answer.status_code == 200:
                return str(answer.json()["task"]["status"]["state"])
            return f"refused {answer.status_code}"

        async def over_grpc() -> str:
            try:
                states = [
                    TaskState.Name(r.task.status.state)
                    async for r in grpc_client.send_message(
                        request(None, {"approved": True}, task_id=task_id)
                    )
                    if r.HasField("task")
                ]
            except (A2AClientError, A2AError) as refused:
                return f"refused {type(refused).__name__}"
            return states[-1]

        calls = [
            over_jsonrpc(urls[i % len(urls)])
            if i % 3 == 0
            else over_rest(urls[i % len(urls)])
            if i % 3 == 1
            else over_grpc()
            for i in range(50)
        ]
        try:
            outcomes = await asyncio.gather(*calls)
        finally:
            await grpc_client.close()
        assert outcomes.count("TASK_STATE_COMPLETED") == 1, outcomes
        refused = [o for o in outcomes if o != "TASK_STATE_COMPLETED"]
        # Busy while the winner runs (-32090 / 409 / FAILED_PRECONDITION); once it has
        # finished, the SDK's answer for a message to a terminal task (-32004, 400).
        # JSON-RPC and REST resend the winner's messageId: while the task still waits
        # with it in its history, that is a message it already holds (-32602, 400).
        assert all(o.startswith("refused") for o in refused), outcomes
        assert {o for o in refused if not o.endswith("Error")} <= {
            "refused -32090",
            "refused -32004",
            "refused -32602",
            "refused 409",
            "refused 400",
        }, outcomes
        # A repeated approval of the finished task is refused too, never new input.
        again = await _rpc(http, urls[-1], "SendMessage", approve)
        assert again["error"]["code"] == -32004, again
        stored = await _rpc(http, urls[-1], "GetTask", {"id": task_id})
        assert stored["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(await _journal_lines(journal, "paid")) == 1, journal.read_text()


async def test_messages_racing_to_a_task_another_replica_finished_are_refused_alike(
    tmp_path: Path, deployments: Callable[[str], list[str]]
) -> None:
    """Replica A parks the payment (its run waits there for input), replica B approves and
    finishes it; then 24 messages reach A at once. Each gets the SDK's terminal-state
    answer (-32004 / 400), none an internal error: a2a-sdk 1.3 hands them to A's parked
    run, whose closed request queue the second one met (HTTP 500 / -32603)."""
    journal = tmp_path / "journal.txt"
    a, b = deployments("postgresql")
    async with httpx.AsyncClient(
        timeout=60, limits=httpx.Limits(max_connections=30), verify=TLS
    ) as http:
        for _ in range(3):
            pay = {"journal": str(journal), "amount": 5}
            parked = await _rpc(http, a, "SendMessage", {"message": _message("probe.pay", pay)})
            task_id = parked["result"]["task"]["id"]
            approve = {"message": _message(None, {"approved": True}, task_id)}
            assert _state(await _rpc(http, b, "SendMessage", approve)) == "TASK_STATE_COMPLETED"

            async def late(i: int, approve: dict[str, Any] = approve) -> str:
                if i % 2:
                    rest = await http.post(a + "/message:send", json=approve, headers=V10)
                    return f"{rest.status_code} {rest.json().get('error', {}).get('message')}"
                answer = await _rpc(http, a, "SendMessage", approve)
                return f"{answer['error']['code']} {answer['error']['message']}"

            outcomes = await asyncio.gather(*(late(i) for i in range(24)))
            terminal = f"Task {task_id} is in terminal state: TASK_STATE_COMPLETED"
            assert set(outcomes) == {f"-32004 {terminal}", f"400 {terminal}"}, outcomes
    assert len(await _journal_lines(journal, "paid")) == 3, journal.read_text()


@pytest.mark.parametrize("backend", ["memory", "postgresql"])
async def test_approvals_racing_cancels_get_typed_answers_that_agree(
    backend: str, tmp_path: Path, deployments: Callable[[str], list[str]]
) -> None:
    """26 approvals and 14 cancels of one parked payment at once, over both replicas, ten
    times. Every answer is a task or a typed refusal (never -32603: a2a-sdk 1.3 let a
    message meet its run's shut queue, and a re-read after a refused save was served from
    the request's kept reads), the task ends in one terminal state that every task answer
    names, and the payment runs at most once per task."""
    journal = tmp_path / "journal.txt"
    urls = deployments(backend)
    async with httpx.AsyncClient(
        timeout=60, limits=httpx.Limits(max_connections=45), verify=TLS
    ) as http:
        for amount in range(1, 11):
            pay = {"journal": str(journal), "amount": amount}
            parked = await _rpc(
                http, urls[0], "SendMessage", {"message": _message("probe.pay", pay)}
            )
            task_id = parked["result"]["task"]["id"]
            approve = {"message": _message(None, {"approved": True}, task_id)}

            async def call(i: int, task_id: str = task_id, approve: Any = approve) -> str:
                url = urls[i % len(urls)]
                if i % 3:
                    answer = await _rpc(http, url, "SendMessage", approve)
                else:
                    answer = await _rpc(http, url, "CancelTask", {"id": task_id})
                if "error" in answer:
                    return str(answer["error"]["code"])
                found = answer["result"]
                return str(found.get("task", found)["status"]["state"])

            outcomes = await asyncio.gather(*(call(i) for i in range(40)))
            stored = await _rpc(http, urls[-1], "GetTask", {"id": task_id})
            final = stored["result"]["status"]["state"]
            assert final in ("TASK_STATE_COMPLETED", "TASK_STATE_CANCELED"), stored
            # -32602: the winner's messageId again while the task waits holding it
            refusals = {"-32090", "-32004", "-32002", "-32602"}
            assert set(outcomes) <= refusals | {final}, (final, outcomes)
    paid = await _journal_lines(journal, "paid")
    assert len(paid) == len({line.split()[1] for line in paid}), paid


@pytest.mark.parametrize("backend", ["memory", "postgresql"])
async def test_a_message_for_a_running_task_is_refused_on_every_binding(
    backend: str, tmp_path: Path, deployments: Callable[[str], list[str]]
) -> None:
    journal = tmp_path / "journal.txt"
    urls = deployments(backend)
    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
        work = {"journal": str(journal), "seconds": 300}
        started = await _rpc(
            http,
            urls[0],
            "SendMessage",
            {
                "message": _message("probe.work", work),
                "configuration": {"returnImmediately": True},
            },
        )
        task_id = started["result"]["task"]["id"]
        deadline = time.monotonic() + 30
        while not await _journal_lines(journal, "started"):
            assert time.monotonic() < deadline, "the module never started"
            await asyncio.sleep(0.05)
        follow_up = {"message": _message("probe.work", work, task_id)}
        for url in urls:
            answer = await _rpc(http, url, "SendMessage", follow_up)
            assert answer["error"]["code"] == -32090, answer
            assert "busy" in answer["error"]["message"]
            rest = await http.post(url + "/message:send", json=follow_up, headers=V10)
            assert rest.status_code == 409, rest.text
        grpc_client = await make_client(urls[0], "GRPC", "1.0")
        try:
            # A plain SDK client reports FAILED_PRECONDITION (it knows no TASK_BUSY).
            with pytest.raises(A2AClientError, match="busy"):
                async for _ in grpc_client.send_message(
                    request("probe.work", work, task_id=task_id)
                ):
                    pass
        finally:
            await grpc_client.close()
        # The refused messages changed nothing: the task still runs, once.
        stored = await _rpc(http, urls[-1], "GetTask", {"id": task_id})
        assert stored["result"]["status"]["state"] == "TASK_STATE_WORKING"
        assert len(await _journal_lines(journal, "started")) == 1
        canceled = await _rpc(http, urls[-1], "CancelTask", {"id": task_id})
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"


@pytest.mark.parametrize("backend", ["memory", "postgresql"])
async def test_a_finished_task_stays_finished(
    backend: str, tmp_path: Path, deployments: Callable[[str], list[str]]
) -> None:
    journal = tmp_path / "journal.txt"
    urls = deployments(backend)
    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
        done = await _rpc(
            http,
            urls[0],
            "SendMessage",
            {"message": _message("probe.work", {"journal": str(journal), "seconds": 0})},
        )
        assert _state(done) == "TASK_STATE_COMPLETED"
        task_id = done["result"]["task"]["id"]
        for url in urls:
            answer = await _rpc(http, url, "CancelTask", {"id": task_id})
            assert answer["error"]["code"] == -32002, answer
            stored = await _rpc(http, url, "GetTask", {"id": task_id})
            assert stored["result"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("backend", ["memory", "postgresql"])
async def test_an_approved_module_runs_only_once_its_approval_is_stored(
    backend: str, tmp_path: Path, deployments: Callable[[str], list[str]]
) -> None:
    """Two approvals and two cancels of one parked payment at once, over both replicas, 20
    times. A payment made is one whose approval the store recorded (``apcore.approval``
    ``approved``, saved with the ``working`` status before the module starts): a cancel
    stored first wins, and the module never runs. Before, in cluster mode, the resumed run
    started the module as soon as it queued ``working``; a cancel stored before that write
    made it fail, yet the payment was made on a task that stayed ``canceled`` with its
    approval ``pending`` (about one round in five)."""
    journal = tmp_path / "journal.txt"
    urls = deployments(backend)
    async with httpx.AsyncClient(
        timeout=60, limits=httpx.Limits(max_connections=10), verify=TLS
    ) as http:
        unrecorded = []
        for amount in range(1, 21):
            pay = {"journal": str(journal), "amount": amount}
            parked = await _rpc(
                http, urls[0], "SendMessage", {"message": _message("probe.pay", pay)}
            )
            task_id = parked["result"]["task"]["id"]
            approve = {"message": _message(None, {"approved": True}, task_id)}

            async def call(i: int, task_id: str = task_id, approve: Any = approve) -> None:
                url = urls[i // 2 % len(urls)]
                if i % 2:
                    await _rpc(http, url, "SendMessage", approve)
                else:
                    await _rpc(http, url, "CancelTask", {"id": task_id})

            await asyncio.gather(*(call(i) for i in range(4)))
            stored = await _rpc(http, urls[-1], "GetTask", {"id": task_id})
            task = stored["result"]
            paid = [
                line
                for line in await _journal_lines(journal, "paid")
                if line.split()[1] == str(amount)
            ]
            approval = task["metadata"]["apcore"]["approval"]["status"]
            if paid and approval != "approved":
                unrecorded.append((amount, task["status"]["state"], approval))
        assert unrecorded == []
