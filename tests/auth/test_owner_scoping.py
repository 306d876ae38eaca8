"""alice and bob over JSON-RPC 1.0/0.3 and REST 1.0/0.3: each sees only their own tasks.

The agent runs with ``require_auth=False`` so anonymous callers can be checked too: they
see none of alice's tasks either. Official a2a-sdk clients are the peers; raw httpx checks
the wire answers.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from a2a.client.errors import A2AClientError
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import MethodNotFoundError, TaskNotFoundError

from tests._support import TLS

from .agent import BINDINGS, message, sdk_client, send, serve_agent
from .keys import HMAC_SECRET, bearer, hs_plain

# The SDK's 0.3 REST client reports every 404 as MethodNotFoundError.
NOT_FOUND = (TaskNotFoundError, MethodNotFoundError)
HOOK = "http://127.0.0.1:9/hook"


def auth(sub: str | None) -> dict[str, str]:
    if sub is None:
        return {}
    return bearer(hs_plain(sub=sub))


async def collect(stream: AsyncIterator[object], into: list[object]) -> None:
    async for event in stream:
        into.append(event)


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    with serve_agent(
        auth_key=HMAC_SECRET,
        require_auth=False,
        push_notifications=True,
        push_allow_insecure_urls=True,
    ) as url:
        yield url


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_tasks_and_push_configs_are_scoped_to_their_owner(
    agent_url: str, binding: str, version: str
) -> None:
    async with (
        sdk_client(agent_url, binding, version, auth("alice")) as alice,
        sdk_client(agent_url, binding, version, auth("bob")) as bob,
        sdk_client(agent_url, binding, version, auth(None)) as anonymous,
    ):
        # The SDK's 0.3 REST client has no "list push configs"; raw HTTP covers it.
        sdk_lists_configs = (binding, version) != ("HTTP+JSON", "0.3")
        task = await send(alice, message("demo.add", {"a": 2, "b": 3}))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert (await alice.get_task(GetTaskRequest(id=task.id))).id == task.id
        config_id = "cfg-" + uuid.uuid4().hex[:8]
        created = await alice.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, id=config_id, url=HOOK)
        )
        assert created.url == HOOK

        for other in (bob, anonymous):
            with pytest.raises(NOT_FOUND):
                await other.get_task(GetTaskRequest(id=task.id))
            with pytest.raises(NOT_FOUND):
                await send(
                    other,
                    message(
                        "demo.add", {"a": 1, "b": 1}, task_id=task.id, context_id=task.context_id
                    ),
                )
            with pytest.raises(NOT_FOUND):
                await other.create_task_push_notification_config(
                    TaskPushNotificationConfig(task_id=task.id, id="evil", url=HOOK)
                )
            with pytest.raises(NOT_FOUND):
                await other.get_task_push_notification_config(
                    GetTaskPushNotificationConfigRequest(task_id=task.id, id=config_id)
                )
            if sdk_lists_configs:
                with pytest.raises(NOT_FOUND):
                    await other.list_task_push_notification_configs(
                        ListTaskPushNotificationConfigsRequest(task_id=task.id)
                    )
            if version == "1.0":  # 0.3 has no DELETE over REST and no ListTasks at all
                with pytest.raises(NOT_FOUND):
                    await other.delete_task_push_notification_config(
                        DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=config_id)
                    )
                listed = await other.list_tasks(ListTasksRequest())
                assert task.id not in [t.id for t in listed.tasks]

        # alice's own view is intact after all of that.
        if sdk_lists_configs:
            configs = await alice.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            assert [c.id for c in configs.configs] == [config_id]
        else:
            path = f"/v1/tasks/{task.id}/pushNotificationConfigs"
            async with httpx.AsyncClient(base_url=agent_url, verify=TLS) as http:
                assert (await http.get(path, headers=auth("bob"))).status_code == 404
                assert (await http.get(path)).status_code == 404
                mine = await http.get(path, headers=auth("alice"))
                assert mine.status_code == 200
                assert config_id in mine.text
        got = await alice.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id=config_id)
        )
        assert got.url == HOOK
        if version == "1.0":
            listed = await alice.list_tasks(ListTasksRequest())
            assert task.id in [t.id for t in listed.tasks]
            await alice.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=config_id)
            )


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_cancel_and_subscribe_are_scoped_to_their_owner(
    agent_url: str, binding: str, version: str
) -> None:
    async with (
        sdk_client(agent_url, binding, version, auth("alice")) as alice,
        sdk_client(agent_url, binding, version, auth("bob")) as bob,
        sdk_client(agent_url, binding, version, auth(None)) as anonymous,
        sdk_client(agent_url, binding, version, auth("alice"), streaming=True) as alice_sse,
        sdk_client(agent_url, binding, version, auth("bob"), streaming=True) as bob_sse,
    ):
        request = message("demo.wait")
        request.configuration.return_immediately = True
        task = await send(alice, request)
        assert task.status.state in (
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        )
        for other in (bob, anonymous):
            with pytest.raises(NOT_FOUND):
                await other.cancel_task(CancelTaskRequest(id=task.id))
        # The SDK's 0.3 REST subscribe raises inside the already-started SSE response for an
        # unknown task, so that client sees a dropped connection instead of a 404.
        expected = (
            (*NOT_FOUND, A2AClientError)
            if (binding, version) == ("HTTP+JSON", "0.3")
            else NOT_FOUND
        )
        leaked: list[object] = []
        with pytest.raises(expected):
            await collect(bob_sse.subscribe(SubscribeToTaskRequest(id=task.id)), leaked)
        assert leaked == []

        stream = alice_sse.subscribe(SubscribeToTaskRequest(id=task.id))
        first = await asyncio.wait_for(anext(stream), timeout=10)
        assert first.task.id == task.id
        await stream.aclose()

        still = await alice.get_task(GetTaskRequest(id=task.id))
        assert still.status.state == TaskState.TASK_STATE_WORKING, "others could not cancel it"
        canceled = await alice.cancel_task(CancelTaskRequest(id=task.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED


async def test_raw_wire_answers_for_someone_elses_task(agent_url: str) -> None:
    async with sdk_client(agent_url, "JSONRPC", "1.0", auth("alice")) as alice:
        task = await send(alice, message("demo.add", {"a": 1, "b": 2}))
    bob = auth("bob")
    async with httpx.AsyncClient(base_url=agent_url, verify=TLS) as http:
        v10 = await http.post(
            "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task.id}},
            headers={**bob, "A2A-Version": "1.0"},
        )
        assert v10.json()["error"]["code"] == -32001
        v03 = await http.post(
            "/",
            json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task.id}},
            headers=bob,
        )
        assert v03.json()["error"]["code"] == -32001
        for path, version in ((f"/tasks/{task.id}", "1.0"), (f"/v1/tasks/{task.id}", "0.3")):
            rest = await http.get(path, headers={**bob, "A2A-Version": version})
            assert rest.status_code == 404, path
        listed = await http.get("/tasks", headers={**bob, "A2A-Version": "1.0"})
        assert task.id not in listed.text
        mine = await http.get(f"/tasks/{task.id}", headers={**auth("alice"), "A2A-Version": "1.0"})
        assert mine.status_code == 200
        assert mine.json()["id"] == task.id


API_KEY = "k-owner-0123456789abcdef"


@pytest.fixture(scope="module")
def mixed_agent_url() -> Iterator[str]:
    """JWT (any issuer, one key) and an API key whose identity is also named ``alice``."""
    with serve_agent(auth_key=HMAC_SECRET, api_keys=(f"{API_KEY}=alice",)) as url:
        yield url


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_equal_names_from_different_authenticators_never_share_tasks(
    mixed_agent_url: str, binding: str, version: str
) -> None:
    jwt_alice = bearer(hs_plain(sub="alice", iss="https://idp-a.example/"))
    other_idp_alice = bearer(hs_plain(sub="alice", iss="https://idp-b.example/"))
    no_iss_alice = bearer(hs_plain(sub="alice"))
    key_alice = {"X-API-Key": API_KEY}
    callers = {
        "jwt": jwt_alice,
        "other issuer": other_idp_alice,
        "no issuer": no_iss_alice,
        "api key": key_alice,
    }
    tasks: dict[str, str] = {}
    for name, headers in callers.items():
        async with sdk_client(mixed_agent_url, binding, version, headers) as client:
            task = await send(client, message("demo.add", {"a": 1, "b": 1}))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            tasks[name] = task.id
    for name, headers in callers.items():
        async with sdk_client(mixed_agent_url, binding, version, headers) as client:
            assert (await client.get_task(GetTaskRequest(id=tasks[name]))).id == tasks[name]
            for other, task_id in tasks.items():
                if other == name:
                    continue
                with pytest.raises(NOT_FOUND):
                    await client.get_task(GetTaskRequest(id=task_id))
            if version == "1.0":
                listed = {t.id for t in (await client.list_tasks(ListTasksRequest())).tasks}
                assert tasks[name] in listed
                assert listed.isdisjoint(v for k, v in tasks.items() if k != name)


async def test_a_callers_answers_are_never_kept_by_a_shared_cache(agent_url: str) -> None:
    # A cache in front of the agent (Varnish, a CDN) keeps a GET answer that says nothing
    # against it (RFC 9111 §4.2.2) and hands it to whoever asks the same URL next: bob's
    # GET /tasks got alice's list. Only Authorization stops a shared cache by itself, and
    # API keys travel in X-API-Key. Every answer of an A2A call is one caller's.
    async with sdk_client(agent_url, "JSONRPC", "1.0", auth("alice")) as alice:
        task = await send(alice, message("demo.add", {"a": 1, "b": 2}))
        await alice.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, id="cfg", url=HOOK)
        )
    v10, v03 = {**auth("alice"), "A2A-Version": "1.0"}, auth("alice")
    gets = {
        f"/tasks/{task.id}": v10,
        f"/tenant-a/tasks/{task.id}": v10,
        "/tasks?pageSize=5": v10,
        f"/tasks/{task.id}/pushNotificationConfigs": v10,
        f"/tasks/{task.id}/pushNotificationConfigs/cfg": v10,
        "/extendedAgentCard": v10,
        f"/push/status/{task.id}": v10,
        f"/v1/tasks/{task.id}": v03,
        f"/v1/tasks/{task.id}/pushNotificationConfigs": v03,
        "/v1/card": v03,
    }
    async with httpx.AsyncClient(base_url=agent_url, verify=TLS) as http:
        for path, headers in gets.items():
            answer = await http.get(path, headers=headers)
            assert answer.status_code == 200, path
            assert answer.headers.get("cache-control") == "no-store", path
        # An answer to another caller too: it says nothing of what one caller may see.
        refused = await http.get(f"/tasks/{task.id}", headers={**v10, **auth("bob")})
        assert refused.status_code == 404
        assert refused.headers.get("cache-control") == "no-store"
        # Refused before any handler (credentials, version rule, a query value): the
        # edge's errors say it too.
        edge = {
            401: {**v10, "Authorization": "Bearer not-a-token"},
            400: {**v10, "A2A-Version": "9.9"},
        }
        for status, headers in edge.items():
            answer = await http.get(f"/tasks/{task.id}", headers=headers)
            assert answer.status_code == status, answer.text
            assert answer.headers.get("cache-control") == "no-store", status
        answer = await http.get("/tasks?includeArtifacts=yes", headers=v10)
        assert answer.status_code == 400, answer.text
        assert answer.headers.get("cache-control") == "no-store"
