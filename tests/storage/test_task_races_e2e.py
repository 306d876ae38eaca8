"""Many callers at once on one task, on every store and deployment: no task is lost,
duplicated, corrupted or left in a state no request can leave.

Deployments: one process on the memory store, on SQLite, two workers (``--workers 2``) of
one agent and two cluster replicas on PostgreSQL. Clients: raw httpx and the official SDK
on JSON-RPC and REST (1.0 and 0.3) and gRPC, all at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
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
BACKENDS = ["memory", "sqlite", "workers", "cluster"]
#: the SDK peers racing raw JSON-RPC 1.0 calls: (binding, version)
#: push configs on; the webhook (a closed port on this host) never answers
PUSH = ["--push-notifications", "--push-allow-insecure-urls"]
HOOK = "http://127.0.0.1:9/hook"
PEERS = [("HTTP+JSON", "0.3"), ("JSONRPC", "0.3"), ("GRPC", "1.0"), ("HTTP+JSON", "1.0")]


@contextlib.contextmanager
def _deployment(backend: str, folder: Path) -> Iterator[list[str]]:
    """Base URLs of *backend*'s deployment (gRPC on the first)."""
    with contextlib.ExitStack() as stack:
        args = ["--extensions-dir", PROBES, "--grpc-port", str(free_port()), *PUSH]
        env = {"A2A_CLUSTER_POLL_INTERVAL": "0.1"}
        if backend == "memory":
            yield [stack.enter_context(cli_server(args))[0]]
        elif backend == "sqlite":
            args += ["--task-store", f"sqlite:///{folder / 'tasks.db'}"]
            yield [stack.enter_context(cli_server(args))[0]]
        elif backend == "workers":
            store = stack.enter_context(pg_schema_url(agents=2))
            args += ["--task-store", store, "--cluster", "--workers", "2"]
            yield [stack.enter_context(cli_server(args, env=env))[0]]
        else:
            store = stack.enter_context(pg_schema_url(agents=2))
            cluster = ["--extensions-dir", PROBES, *PUSH, "--task-store", store, "--cluster"]
            a = stack.enter_context(cli_server([*args[2:4], *cluster], env=env))[0]
            b = stack.enter_context(cli_server(cluster, env=env))[0]
            yield [a, b]


@pytest.fixture(scope="module")
def deployments(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], list[str]]]:
    """A backend's deployment, started on first use and shared by this file's tests."""
    started: dict[str, list[str]] = {}
    with contextlib.ExitStack() as stack:

        def get(backend: str) -> list[str]:
            if backend not in started:
                folder = tmp_path_factory.mktemp(backend)
                started[backend] = stack.enter_context(_deployment(backend, folder))
            return started[backend]

        yield get


def _message(skill: str | None, data: dict[str, Any], task_id: str = "") -> dict[str, Any]:
    msg: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER"}
    msg["parts"] = [{"data": data}]
    if skill:
        msg["metadata"] = {"skillId": skill}
    if task_id:
        msg["taskId"] = task_id
    return msg


async def _rpc(url: str, method: str, params: dict[str, Any]) -> Any:
    # A connection of its own per call: with two workers, the kernel picks either.
    async with httpx.AsyncClient(timeout=120, verify=TLS) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        response = await http.post(url + "/", json=body, headers=V10)
    assert response.status_code == 200, response.text
    return response.json()


def _refusal(answer: dict[str, Any]) -> str | None:
    return str(answer["error"]["code"]) if "error" in answer else None


def _outcome(answer: dict[str, Any]) -> str:
    if "error" in answer:
        return str(answer["error"]["code"])
    found = answer["result"]
    return str(found.get("task", found)["status"]["state"])


async def _peer_send(url: str, binding: str, version: str, task_id: str, message_id: str) -> str:
    """An approval sent by an SDK peer: the task's last state, or the refusal's words."""
    client = await make_client(url, binding, version)
    try:
        states = [
            TaskState.Name(r.task.status.state)
            async for r in client.send_message(
                request(None, {"approved": True}, task_id=task_id, message_id=message_id)
            )
            if r.HasField("task")
        ]
    except (A2AClientError, A2AError) as refused:
        # The SDK's 0.3 REST transport names only the HTTP status of a refusal.
        words = str(refused).splitlines()[0]
        return f"refused {type(refused).__name__}: {words}"
    finally:
        await client.close()
    return states[-1] if states else "no task"


async def _paid_amounts(journal: Path) -> list[int]:
    """The amount of each payment the module made, in order."""
    lines = journal.read_text().splitlines() if journal.exists() else []
    return [int(line.split()[1]) for line in lines if line.startswith("paid")]


async def _paid(journal: Path) -> int:
    return len(await _paid_amounts(journal))


@pytest.mark.parametrize("backend", BACKENDS)
async def test_twenty_answers_at_once_continue_the_task_once(
    backend: str, tmp_path: Path, deployments: Callable[[str], list[str]]
) -> None:
    """20 approvals of one parked payment, ten messageIds each sent twice, at once over raw
    JSON-RPC 1.0 and SDK peers (REST and JSON-RPC 0.3, gRPC, REST 1.0), on each deployment's
    processes. Exactly one continues the task; every other is refused with a typed error
    (busy, or the task finished); the stored history holds the winning approval once and no
    refused one; the payment runs once."""
    urls = deployments(backend)
    journal = tmp_path / "journal.txt"
    pay = {"journal": str(journal), "amount": 7}
    parked = await _rpc(urls[0], "SendMessage", {"message": _message("probe.pay", pay)})
    assert _outcome(parked) == "TASK_STATE_INPUT_REQUIRED", parked
    task_id = parked["result"]["task"]["id"]
    ids = [uuid.uuid4().hex for _ in range(10)] * 2  # each messageId sent twice at once

    async def answer(i: int) -> str:
        url = urls[i % len(urls)]
        if i % 2 == 0:
            message = _message(None, {"approved": True}, task_id) | {"messageId": ids[i]}
            return _outcome(await _rpc(url, "SendMessage", {"message": message}))
        binding, version = PEERS[(i // 2) % len(PEERS)]
        return await _peer_send(
            urls[0] if binding == "GRPC" else url, binding, version, task_id, ids[i]
        )

    outcomes = await asyncio.gather(*(answer(i) for i in range(20)))
    assert outcomes.count("TASK_STATE_COMPLETED") == 1, outcomes
    for outcome in outcomes:
        # -32602: the winner's messageId again, while the task waits holding it
        assert (
            outcome == "TASK_STATE_COMPLETED"
            or outcome in ("-32090", "-32004", "-32602")
            or (
                outcome.startswith("refused")
                and any(w in outcome for w in ("busy", "terminal", "Error 409", "Error 400"))
            )
        ), outcomes
    stored = await _rpc(urls[-1], "GetTask", {"id": task_id, "historyLength": 100})
    task = stored["result"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    held = [m["messageId"] for m in task.get("history", []) if m["role"] == "ROLE_USER"]
    taken = [i for i in set(ids) if i in held]
    assert len(taken) == 1 and held.count(taken[0]) == 1, (held, outcomes)
    assert len(held) == len(set(held)), held
    assert await _paid(journal) == 1


async def _all_ready(
    watchers: list[asyncio.Future[list[str]]], readies: list[asyncio.Event]
) -> None:
    """Every subscriber has its first event; a subscriber that ended first (refused) fails
    the test with its error, where waiting for its event would wait for ever."""
    waits = [asyncio.ensure_future(ready.wait()) for ready in readies]
    try:
        async with asyncio.timeout(120):  # a hang guard
            for watcher, wait in zip(watchers, waits, strict=True):
                await asyncio.wait({watcher, wait}, return_when=asyncio.FIRST_COMPLETED)
                if not wait.done():
                    watcher.result()  # its error
                    raise AssertionError("a subscriber's stream closed before any event")
    finally:
        for wait in waits:
            wait.cancel()


async def _subscriber(url: str, task_id: str, ready: asyncio.Event) -> list[str]:
    """The states a ``SubscribeToTask`` stream names, in order, until it closes."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
    states: list[str] = []
    async with (
        httpx.AsyncClient(timeout=120, verify=TLS) as http,
        http.stream("POST", url + "/", json=body, headers=V10) as response,
    ):
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            result = json.loads(line[5:])
            assert "result" in result, result
            found = result["result"]
            status = (found.get("task") or found.get("statusUpdate") or {}).get("status")
            if status is not None:
                states.append(status["state"])
            ready.set()
    return states


@pytest.mark.parametrize("backend", BACKENDS)
async def test_cancels_racing_an_answer_end_the_task_once_for_everyone(
    backend: str, tmp_path: Path, deployments: Callable[[str], list[str]]
) -> None:
    """Six subscribers on a parked payment (on each process), then its approval and one to
    five cancels at once. The task ends in one terminal state; every answer agrees
    with it (a cancel answered with the canceled task only if it ended canceled, else
    -32002; the approval completed only if it ended completed; canceled only if the
    history holds it, else refused); every subscriber's stream closes on that same state;
    every completed task paid once, and a payment only ever for an approval taken (a cancel
    may meet a payment under way: a sync module is not stopped half-way)."""
    urls = deployments(backend)
    journal = tmp_path / "journal.txt"
    completed: set[int] = set()
    taken: set[int] = set()
    for amount in range(1, 6):
        pay = {"journal": str(journal), "amount": amount}
        parked = await _rpc(urls[0], "SendMessage", {"message": _message("probe.pay", pay)})
        task_id = parked["result"]["task"]["id"]
        readies = [asyncio.Event() for _ in range(6)]
        watchers = [
            asyncio.ensure_future(_subscriber(urls[i % len(urls)], task_id, ready))
            for i, ready in enumerate(readies)
        ]
        await _all_ready(watchers, readies)
        approve = {"message": _message(None, {"approved": True}, task_id)}
        # The approval first, then 1 to 5 cancels: either may end the task.
        calls = [_rpc(urls[amount % len(urls)], "SendMessage", approve)]
        calls += [_rpc(urls[i % len(urls)], "CancelTask", {"id": task_id}) for i in range(amount)]
        answers = [_outcome(a) for a in await asyncio.gather(*calls)]
        streams = await asyncio.wait_for(asyncio.gather(*watchers), 120)  # a hang guard
        stored = await _rpc(urls[-1], "GetTask", {"id": task_id, "historyLength": 100})
        final = stored["result"]["status"]["state"]
        assert final in ("TASK_STATE_COMPLETED", "TASK_STATE_CANCELED"), stored
        approval = answers.pop(0)
        assert approval in (final, "-32090", "-32004"), (final, approval)
        assert (approval == "TASK_STATE_COMPLETED") == (final == "TASK_STATE_COMPLETED")
        if approval == "TASK_STATE_CANCELED":  # taken, then canceled: the history holds it
            held = [m["messageId"] for m in stored["result"].get("history", [])]
            assert approve["message"]["messageId"] in held, stored
        # A cancel succeeds only with the canceled task; else the task was not cancelable.
        assert set(answers) <= {"TASK_STATE_CANCELED", "-32002"}, (final, answers)
        assert final == "TASK_STATE_CANCELED" or "TASK_STATE_CANCELED" not in answers
        assert all(s and s[-1] == final for s in streams), (final, streams)
        if final == "TASK_STATE_COMPLETED":
            completed.add(amount)
        if approval in ("TASK_STATE_COMPLETED", "TASK_STATE_CANCELED"):
            taken.add(amount)
    # Paid: every completed task, maybe a task canceled as it paid; never a refused approval.
    paid = await _paid_amounts(journal)
    assert len(paid) == len(set(paid)) and completed <= set(paid) <= taken, (paid, taken)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_push_configs_set_and_deleted_at_once_as_the_task_ends(
    backend: str, tmp_path: Path, deployments: Callable[[str], list[str]]
) -> None:
    """On a parked payment, at once: eight creates of one config id (each its own URL),
    three creates of other ids, six deletes of that id, the approval that ends the task.
    Every answer is a config, ``{}`` or a typed refusal (never -32603); afterwards every
    process lists the same configs, each id once, and gets each listed one as listed; the
    per-task cap (10) still has room for exactly the configs not stored. Two rounds."""
    urls = deployments(backend)
    for amount in range(1, 3):
        await _push_round(urls, tmp_path / "journal.txt", amount)


async def _push_round(urls: list[str], journal: Path, amount: int) -> None:
    """One round of the test above, on a task of its own."""
    pay = {"journal": str(journal), "amount": amount}
    parked = await _rpc(urls[0], "SendMessage", {"message": _message("probe.pay", pay)})
    task_id = parked["result"]["task"]["id"]
    create = "CreateTaskPushNotificationConfig"
    calls = [
        _rpc(urls[i % len(urls)], create, {"taskId": task_id, "id": "hook", "url": f"{HOOK}/{i}"})
        for i in range(8)
    ]
    calls += [
        _rpc(urls[i % len(urls)], create, {"taskId": task_id, "id": f"c{i}", "url": HOOK})
        for i in range(3)
    ]
    delete = "DeleteTaskPushNotificationConfig"
    calls += [
        _rpc(urls[i % len(urls)], delete, {"taskId": task_id, "id": "hook"}) for i in range(6)
    ]
    approve = {"message": _message(None, {"approved": True}, task_id)}
    calls.insert(5, _rpc(urls[-1], "SendMessage", approve))
    answers = await asyncio.gather(*calls)
    errors = [a["error"] for a in answers if "error" in a]
    assert all(e["code"] != -32603 for e in errors), errors
    assert _outcome(answers[5]) == "TASK_STATE_COMPLETED", answers[5]
    listed = []
    for url in urls:
        found = await _rpc(url, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        configs = sorted(found["result"].get("configs", []), key=lambda c: str(c["id"]))
        ids = [c["id"] for c in configs]
        assert len(ids) == len(set(ids)) and {"c0", "c1", "c2"} <= set(ids), ids
        for config in configs:
            got = await _rpc(
                url, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": config["id"]}
            )
            assert got.get("result") == config, (got, config)
        listed.append(configs)
    assert all(configs == listed[0] for configs in listed), listed
    # The per-task cap (10) counts what is stored, no more: the rest can still be added.
    added = []
    for n in range(10):
        config = {"taskId": task_id, "id": f"n{n}", "url": HOOK}
        answer = await _rpc(urls[n % len(urls)], create, config)
        added.append(_refusal(answer) or "added")
    room = 10 - len(listed[0])
    assert added == ["added"] * room + ["-32091"] * (10 - room), (listed[0], added)
