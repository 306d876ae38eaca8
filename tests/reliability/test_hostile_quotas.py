"""Quotas hold under a burst: 50 attempts at the same moment, quota 3, 3 pass.

Per caller: new tasks and open streams; per task: push configs.

The attempts are spread over JSON-RPC and REST in both protocol versions, and run against
one process (and in cluster mode on SQLite and PostgreSQL), ``--workers 2``
and two replicas (cluster mode on SQLite and PostgreSQL: the quota is the agent's, not one
process's). Each refused attempt gets -32091 / HTTP 429 and creates
nothing; ``docs/reliability.md`` ("Hostile callers") quotes the figures.

Each deployment starts once for the module; each test is a caller of its own (an API key),
so the tasks and streams one test leaves do not count against another's quota.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .._postgres import pg_schema_url
from .._support import TLS, cli_server, find_key, sse_frames
from ..storage.test_replicas_e2e import PROBES

QUOTA = 3
ATTEMPTS = 50
DIALECTS = ("jsonrpc-1.0", "jsonrpc-0.3", "rest-1.0", "rest-0.3")
#: (deployment, task store): one process (its slots in memory whatever the store) and in
#: cluster mode, two workers, two replicas; SQLite's driver reports no row count for the
#: statement that takes a slot (issue 40)
DEPLOYMENTS = [
    ("one", "memory"),
    ("cluster", "sqlite"),
    ("cluster", "postgresql"),
    ("workers", "sqlite"),
    ("workers", "postgresql"),
    ("replicas", "sqlite"),
    ("replicas", "postgresql"),
]
#: one caller per test: its API key is ``key-<caller>``
CALLERS = ("tasks", "streams", "push", "slots", "ended")


def _headers(caller: str, version: str = "1.0") -> dict[str, str]:
    return {"A2A-Version": version, "X-API-Key": f"key-{caller}"}


@contextlib.contextmanager
def _deployment(
    kind: str, store: str = "postgresql", tmp: Path | None = None
) -> Iterator[list[str]]:
    """Base URLs of one agent: one process (*store*; ``cluster``: in cluster mode), two
    workers, or two replicas (cluster mode on *store*; SQLite: a file in *tmp*)."""
    env = {
        "A2A_MAX_UNFINISHED_TASKS_PER_CALLER": str(QUOTA),
        "A2A_MAX_STREAMS_PER_CALLER": str(QUOTA),
        "A2A_CLUSTER_POLL_INTERVAL": "0.1",
        "A2A_PUSH_MAX_CONFIGS_PER_TASK": str(QUOTA),
        "PUSH_NOTIFICATIONS": "true",
        "A2A_PUSH_ALLOW_INSECURE_URLS": "true",
    }
    args = ["--extensions-dir", PROBES]
    for caller in CALLERS:
        args += ["--api-key", f"key-{caller}={caller}"]
    with contextlib.ExitStack() as stack:
        if store == "sqlite":
            assert tmp is not None
            args += ["--task-store", f"sqlite:///{tmp / 'tasks.db'}"]
        elif store == "postgresql":
            args += ["--task-store", stack.enter_context(pg_schema_url(agents=2))]
        if kind == "one":
            yield [stack.enter_context(cli_server(args, env=env))[0]]
            return
        args.append("--cluster")
        if kind == "cluster":
            yield [stack.enter_context(cli_server(args, env=env))[0]]
            return
        if kind == "workers":
            yield [stack.enter_context(cli_server([*args, "--workers", "2"], env=env))[0]]
            return
        a = stack.enter_context(cli_server(args, env=env))[0]
        b = stack.enter_context(cli_server(args, env=env))[0]
        yield [a, b]


@pytest.fixture(scope="module", params=DEPLOYMENTS, ids=[f"{k}-{s}" for k, s in DEPLOYMENTS])
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[str]]:
    """Base URLs of the (kind, store) deployment, shared by the module's tests (pytest runs
    the tests of one deployment together, then stops it)."""
    kind, store = request.param
    with _deployment(kind, store, tmp_path_factory.mktemp("quotas")) as urls:
        yield urls


def _call(
    base: str, dialect: str, skill: str, data: dict[str, Any], *, stream: bool, caller: str
) -> Any:
    """``(url, headers, body)`` of a new-task request in *dialect*, by *caller*."""
    legacy = dialect.endswith("0.3")
    part: dict[str, Any] = {"data": data}
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "user" if legacy else "ROLE_USER",
        "parts": [{"kind": "data", **part} if legacy else part],
        "metadata": {"skillId": skill},
    }
    if legacy:
        message["kind"] = "message"
    headers = _headers(caller, "0.3" if legacy else "1.0")
    verb = "stream" if stream else "send"
    if dialect == "rest-0.3":
        del message["kind"], message["parts"]
        message.update(role="ROLE_USER", content=[{"data": part}])
        return f"{base}/v1/message:{verb}", headers, {"message": message}
    if dialect == "rest-1.0":
        return f"{base}/message:{verb}", headers, {"message": message}
    method = f"message/{verb}" if legacy else ("SendStreamingMessage" if stream else "SendMessage")
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}
    return f"{base}/", headers, body


def _refused(status: int, payload: Any) -> bool:
    if status == 429:
        return True
    error = payload.get("error") if isinstance(payload, dict) else None
    return isinstance(error, dict) and error.get("code") == -32091


def _task_id(payload: Any) -> str | None:
    """The task id in a JSON-RPC result or REST body of any version (first event too)."""
    result = payload.get("result", payload)
    for candidate in (result.get("task"), result, result.get("statusUpdate")):
        if isinstance(candidate, dict):
            found = candidate.get("id") or candidate.get("taskId")
            if isinstance(found, str):
                return found
    return None


async def _burst(
    urls: list[str], one: Any, attempts: int = ATTEMPTS
) -> list[tuple[bool, str | None]]:
    """*attempts* calls of ``one(http, base, dialect)``, released together once every
    attempt has its client and waits."""
    start, ready = asyncio.Event(), asyncio.Semaphore(0)

    async def attempt(index: int) -> tuple[bool, str | None]:
        # A connection of its own, so with workers the kernel may pick either process.
        async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
            ready.release()
            await start.wait()
            base = urls[index % len(urls)]
            return await one(http, base, DIALECTS[index % len(DIALECTS)])

    tasks = [asyncio.create_task(attempt(i)) for i in range(attempts)]
    for _ in tasks:
        await ready.acquire()
    start.set()
    return await asyncio.gather(*tasks)


async def test_fifty_concurrent_new_tasks_against_a_quota_of_three(
    deployment: list[str], tmp_path: Path
) -> None:
    journal = str(tmp_path / "journal.txt")

    async def send(http: httpx.AsyncClient, base: str, dialect: str) -> tuple[bool, str | None]:
        pay = {"journal": journal, "amount": 5}
        url, headers, body = _call(base, dialect, "probe.pay", pay, stream=False, caller="tasks")
        response = await http.post(url, json=body, headers=headers)
        payload = response.json()
        if _refused(response.status_code, payload):
            return False, None
        assert response.status_code == 200 and "error" not in payload, payload
        return True, _task_id(payload)

    urls = deployment
    outcomes = await _burst(urls, send)
    accepted = [task_id for ok, task_id in outcomes if ok]
    assert len(accepted) == QUOTA, f"{len(accepted)} of {ATTEMPTS} accepted"
    # The refused ones created nothing: the caller has exactly its quota of tasks.
    async with httpx.AsyncClient(timeout=30, verify=TLS) as http:
        listed = await http.post(
            urls[0] + "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
            headers=_headers("tasks"),
        )
    assert listed.json()["result"]["totalSize"] == QUOTA


async def test_fifty_concurrent_streams_against_a_quota_of_three(
    deployment: list[str], tmp_path: Path
) -> None:
    """Each refusal names the stream quota (a stream let in over it would meet the task
    quota: -32091 in a 200 answer on JSON-RPC, a 429 on REST). The admitted streams stay
    open until every attempt is decided, and one more attempt then is refused as well."""
    journal = str(tmp_path / "journal.txt")
    work = {"journal": journal, "seconds": 60}
    pending = [ATTEMPTS]
    all_decided, drop = asyncio.Event(), asyncio.Event()

    def decided() -> None:
        pending[0] -= 1
        if not pending[0]:
            all_decided.set()

    async def refused(response: httpx.Response) -> None:
        payload = await response.aread()
        assert response.status_code == 429 and b"Stream quota" in payload, payload

    async def open_stream(
        http: httpx.AsyncClient, base: str, dialect: str
    ) -> tuple[bool, str | None]:
        url, headers, body = _call(base, dialect, "probe.work", work, stream=True, caller="streams")
        async with http.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code != 200:
                await refused(response)
                decided()
                return False, None
            # The line iterator is held until the stream is dropped: one abandoned after
            # its first event is closed as soon as it is collected, and httpx closes the
            # connection with it, which frees the stream's slot for a later attempt.
            async with contextlib.aclosing(response.aiter_lines()) as lines:
                task_id, seen = None, list[str]()
                async for line in lines:
                    seen.append(line[:300])
                    if line.startswith("data:"):
                        task_id = _task_id(json.loads(line[5:]))
                        break
                # (when the first event is no task, what the stream answered instead, and how)
                kind = response.headers.get("content-type")
                assert task_id is not None, f"{dialect} {kind}: no task event first: {seen!r}"
                decided()
                await asyncio.wait_for(drop.wait(), 120)
            return True, task_id

    urls = deployment
    burst = asyncio.ensure_future(_burst(urls, open_stream))
    try:
        waiting = asyncio.ensure_future(all_decided.wait())
        await asyncio.wait({burst, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if burst.done():
            burst.result()  # an attempt failed before all were decided
        # The admitted streams are still open: the caller is still at its quota.
        async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
            url, headers, body = _call(
                urls[0], "rest-1.0", "probe.work", work, stream=True, caller="streams"
            )
            async with http.stream("POST", url, json=body, headers=headers) as response:
                await refused(response)
    finally:
        drop.set()
        outcomes = await burst
    opened = [task_id for ok, task_id in outcomes if ok]
    async with httpx.AsyncClient(timeout=30, verify=TLS) as http:
        for task_id in opened:
            cancel = {"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {}}
            cancel["params"] = {"id": task_id}
            await http.post(urls[0] + "/", json=cancel, headers=_headers("streams"))
    assert len(opened) == QUOTA, f"{len(opened)} of {ATTEMPTS} streams opened"


def _push_config(base: str, dialect: str, task_id: str, config_id: str) -> Any:
    """``(url, headers, body)`` of a CreateTaskPushNotificationConfig in *dialect*."""
    hook = f"http://127.0.0.1:9/{config_id}"
    headers = _headers("push", "0.3" if dialect.endswith("0.3") else "1.0")
    if dialect == "rest-0.3":
        body = {"pushNotificationConfig": {"id": config_id, "url": hook}}
        return f"{base}/v1/tasks/{task_id}/pushNotificationConfigs", headers, body
    if dialect == "rest-1.0":
        body = {"id": config_id, "url": hook}
        return f"{base}/tasks/{task_id}/pushNotificationConfigs", headers, body
    if dialect == "jsonrpc-0.3":
        method = "tasks/pushNotificationConfig/set"
        params: dict[str, Any] = {
            "taskId": task_id,
            "pushNotificationConfig": {"id": config_id, "url": hook},
        }
    else:
        method = "CreateTaskPushNotificationConfig"
        params = {"taskId": task_id, "id": config_id, "url": hook}
    return f"{base}/", headers, {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


@pytest.mark.parametrize(
    "deployment",
    [("one", "memory"), ("workers", "postgresql"), ("replicas", "postgresql")],
    ids=["one-memory", "workers-postgresql", "replicas-postgresql"],
    indirect=True,
)
async def test_fifty_concurrent_push_configs_against_a_quota_of_three(
    deployment: list[str], tmp_path: Path
) -> None:
    """The quota is per task; then, emptied again, twenty bursts of 4: exactly 3 each time
    (processes that counted after storing could both withdraw, leaving 2)."""
    journal = str(tmp_path / "journal.txt")

    async def rpc(http: httpx.AsyncClient, base: str, method: str, params: Any) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return (await http.post(base + "/", json=body, headers=_headers("push"))).json()

    async def create(http: httpx.AsyncClient, base: str, dialect: str) -> tuple[bool, str | None]:
        config_id = uuid.uuid4().hex
        url, headers, body = _push_config(base, dialect, task_id, config_id)
        response = await http.post(url, json=body, headers=headers)
        payload = response.json()
        if _refused(response.status_code, payload):
            return False, None
        assert response.status_code == 200 and "error" not in payload, payload
        return True, config_id

    urls = deployment
    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
        pay = {"journal": journal, "amount": 5}
        call = _call(urls[0], "jsonrpc-1.0", "probe.pay", pay, stream=False, caller="push")
        answer = await rpc(http, urls[0], "SendMessage", call[2]["params"])
        task_id = answer["result"]["task"]["id"]
    for attempts in (ATTEMPTS, *[QUOTA + 1] * 20):
        outcomes = await _burst(urls, create, attempts)
        accepted = sorted(str(config_id) for ok, config_id in outcomes if ok)
        assert len(accepted) == QUOTA, f"{len(accepted)} of {attempts} accepted"
        async with httpx.AsyncClient(timeout=30, verify=TLS) as http:
            # The refused ones stored nothing: the task has exactly the accepted configs.
            for base in urls:
                listed = await rpc(
                    http, base, "ListTaskPushNotificationConfigs", {"taskId": task_id}
                )
                assert sorted(c["id"] for c in listed["result"]["configs"]) == accepted
            for i, config_id in enumerate(accepted):
                params = {"taskId": task_id, "id": config_id}
                await rpc(http, urls[i % len(urls)], "DeleteTaskPushNotificationConfig", params)


@pytest.mark.parametrize(
    "deployment", [("replicas", "postgresql")], ids=["replicas-postgresql"], indirect=True
)
async def test_slots_freed_on_one_replica_serve_the_other(
    deployment: list[str], tmp_path: Path
) -> None:
    """Quota 3 over two replicas: a task finished or canceled anywhere frees its slot for
    the caller on either replica, and so does a slot one replica kept leased after a
    blocking call (within a second or so)."""
    journal = str(tmp_path / "journal.txt")

    async def send(
        http: httpx.AsyncClient, base: str, skill: str, data: dict[str, Any], **ids: str
    ) -> Any:
        url, headers, body = _call(base, "jsonrpc-1.0", skill, data, stream=False, caller="slots")
        body["params"]["message"].update(ids)
        return (await http.post(url, json=body, headers=headers)).json()

    def state(answer: Any) -> str:
        return str(answer["result"]["task"]["status"]["state"])

    pay = {"journal": journal, "amount": 5}
    a, b = deployment
    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
        parked = [(await send(http, a, "probe.pay", pay))["result"]["task"]["id"]]
        parked += [(await send(http, a, "probe.pay", pay))["result"]["task"]["id"]]
        parked += [(await send(http, a, "probe.pay", pay))["result"]["task"]["id"]]
        assert (await send(http, b, "probe.pay", pay))["error"]["code"] == -32091
        # Approved on B, a task taken on A finishes there: its slot is free.
        done = await send(http, b, "probe.pay", {"approved": True}, taskId=parked[0])
        assert state(done) == "TASK_STATE_COMPLETED"
        assert state(await send(http, b, "probe.pay", pay)) == "TASK_STATE_INPUT_REQUIRED"
        # Canceled on A: free for B.
        cancel = {"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {}}
        cancel["params"] = {"id": parked[1]}
        await http.post(a + "/", json=cancel, headers=_headers("slots"))
        # A blocking call on A takes the free slot and finishes; A keeps it leased
        # for its next request, then lets it go: B is served after that.
        work = {"journal": journal, "seconds": 0}
        assert state(await send(http, a, "probe.work", work)) == "TASK_STATE_COMPLETED"
        answer: Any = None
        for _ in range(100):
            answer = await send(http, b, "probe.pay", pay)
            if "result" in answer:
                break
            await asyncio.sleep(0.1)
        assert state(answer) == "TASK_STATE_INPUT_REQUIRED", answer


@pytest.mark.parametrize(
    "deployment", [("replicas", "postgresql")], ids=["replicas-postgresql"], indirect=True
)
async def test_a_task_canceled_on_b_while_its_stream_on_a_runs_frees_its_slot(
    deployment: list[str], tmp_path: Path
) -> None:
    """Quota 3, two replicas: a streamed task on A is canceled on B while A's stream still
    holds its slot. Once the stream has ended (canceled), A serves the caller's next task.
    Before, A's stream handed its slot to the canceled task as it ended, as to a task still
    running, so the caller stayed at its quota with two tasks, refused -32091 until a
    recheck of its tasks (at most one per five seconds per replica, and one had just run)."""
    journal = str(tmp_path / "journal.txt")
    a, b = deployment

    async def rpc(http: httpx.AsyncClient, base: str, method: str, params: Any) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return (await http.post(base + "/", json=body, headers=_headers("ended"))).json()

    def new_task(skill: str, data: dict[str, Any]) -> dict[str, Any]:
        return _call(a, "jsonrpc-1.0", skill, data, stream=False, caller="ended")[2]["params"]

    pay = {"journal": journal, "amount": 5}
    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
        parked = [(await rpc(http, a, "SendMessage", new_task("probe.pay", pay)))["result"]]
        parked += [(await rpc(http, a, "SendMessage", new_task("probe.pay", pay)))["result"]]
        parked += [(await rpc(http, a, "SendMessage", new_task("probe.pay", pay)))["result"]]
        # At the quota: A checks the caller's tasks against the store (all unfinished).
        over = await rpc(http, a, "SendMessage", new_task("probe.pay", pay))
        assert over["error"]["code"] == -32091, over
        canceled = await rpc(http, b, "CancelTask", {"id": parked[0]["task"]["id"]})
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED", canceled
        # A streamed task on A takes the free slot; B cancels it while the stream is open.
        url, headers, body = _call(
            a,
            "jsonrpc-1.0",
            "probe.work",
            {"journal": journal, "seconds": 300},
            stream=True,
            caller="ended",
        )
        states: list[str] = []
        async with http.stream("POST", url, json=body, headers=headers) as stream:
            async for _id, event in sse_frames(stream):
                found = find_key(event, "state")
                if "TASK_STATE_WORKING" in found and "TASK_STATE_WORKING" not in states:
                    answer = await rpc(http, b, "CancelTask", {"id": _task_id(event)})
                    assert answer["result"]["status"]["state"] == "TASK_STATE_CANCELED"
                states += found
        assert states[-1] == "TASK_STATE_CANCELED", states
        again = await rpc(http, a, "SendMessage", new_task("probe.pay", pay))
        assert again.get("result", {}).get("task", {}).get("status", {}).get("state") == (
            "TASK_STATE_INPUT_REQUIRED"
        ), again
