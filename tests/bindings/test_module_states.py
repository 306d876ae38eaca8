"""A module that needs a credential (``auth-required``), and one that turns into a task
while it runs (``reply_as(context, "task")`` in a message skill): watched, canceled,
subscribed to and pushed.

Seen by the official SDK client on JSON-RPC, REST and gRPC, 1.0 and 0.3.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from tests._sdk import make_client, request
from tests.push._agent import receiver

from ._outputs_agent import (
    ALL_TRANSPORTS,
    AUTH_REQUIRED,
    BINDINGS,
    COMPLETED,
    TOKEN,
    send,
    serve_outputs,
    text_request,
)

WORKING = TaskState.TASK_STATE_WORKING
CANCELED = TaskState.TASK_STATE_CANCELED
SIGN_IN = {
    "code": "AUTH_REQUIRED",
    "prompt": "Sign in to GitHub",
    "field": "token",
    "scheme": "oauth2",
    "data": {"authorizationUrl": "https://github.example/login/oauth/authorize"},
}


def _asked(task: Any) -> tuple[str, dict[str, Any]]:
    text, data = task.status.message.parts
    return text.text, MessageToDict(data.data)


# -- auth-required ---------------------------------------------------------------------
@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_module_needs_a_credential_and_gets_it(
    agent_url: str, binding: str, version: str
) -> None:
    client = await make_client(agent_url, binding, version)
    try:
        first = await send(client, request("out.repos", {"repo": "apcore/a2a"}))
        assert first.status.state == AUTH_REQUIRED, first.status
        assert _asked(first) == ("Sign in to GitHub", SIGN_IN)
        # A refused credential asks again: a new wait, still auth-required.
        again = await send(client, text_request(None, "gho_expired", task_id=first.id))
        assert again.status.state == AUTH_REQUIRED
        assert _asked(again)[0] == "That token was refused; sign in again"
        # The credential as text fills the field the module named; the input stays.
        done = await send(client, text_request(None, TOKEN, task_id=first.id))
        assert done.status.state == COMPLETED, done.status
        assert [MessageToDict(p.data) for p in done.artifacts[0].parts] == [
            {
                "repo": "apcore/a2a",
                "stars": 7,
                "follow_up": {
                    "prompt": "That token was refused; sign in again",
                    "field": "token",
                    "scheme": "oauth2",
                },
            }
        ]
    finally:
        await client.close()


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_credential_in_message_metadata_streamed(
    agent_url: str, binding: str, version: str
) -> None:
    client = await make_client(agent_url, binding, version, streaming=True)
    try:
        events = [e async for e in client.send_message(request("out.repos", {"repo": "x/y"}))]
        kinds = [e.WhichOneof("payload") for e in events]
        assert kinds == ["task", "status_update", "status_update"]
        assert events[-1].status_update.status.state == AUTH_REQUIRED
        answer = request(None, text="here it is", task_id=events[0].task.id)
        answer.message.metadata.update({"githubToken": TOKEN})
        # The text is no token: the module prefers the one in the metadata.
        second = [e async for e in client.send_message(answer)]
        assert second[-1].status_update.status.state == COMPLETED, second[-1]
    finally:
        await client.close()


async def test_a_credential_is_taken_after_a_restart(tmp_path: Any) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    with serve_outputs(task_store=store) as url:
        client = await make_client(url, "HTTP+JSON", "0.3")
        try:
            asked = await send(client, request("out.repos", {"repo": "a/b"}))
            assert asked.status.state == AUTH_REQUIRED
        finally:
            await client.close()
    with serve_outputs(task_store=store) as url:
        client = await make_client(url, "GRPC", "1.0")
        try:
            done = await send(client, request(None, {"token": TOKEN}, task_id=asked.id))
            assert done.status.state == COMPLETED, done.status
            assert MessageToDict(done.artifacts[0].parts[0].data)["repo"] == "a/b"
        finally:
            await client.close()


# -- a message skill that chooses a task while it runs ---------------------------------
@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_choosing_a_task_creates_it_at_once(
    agent_url: str, binding: str, version: str
) -> None:
    client = await make_client(agent_url, binding, version)
    try:
        quick = await send(client, request("out.work", {"seconds": 0}))
        assert isinstance(quick, Message)
        assert MessageToDict(quick.parts[0].data) == {"done": "quick"}
        # Long work: the task exists while the module runs, and can be canceled.
        started = await send(client, request("out.work", {"seconds": 30}, return_immediately=True))
        assert isinstance(started, Task) and started.id
        running = await client.get_task(GetTaskRequest(id=started.id))
        assert running.status.state == WORKING, running.status
        await client.cancel_task(CancelTaskRequest(id=started.id))
        async with asyncio.timeout(10):
            while (await client.get_task(GetTaskRequest(id=started.id))).status.state != CANCELED:
                await asyncio.sleep(0.05)
    finally:
        await client.close()


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_a_chosen_task_streams_and_can_be_watched(
    agent_url: str, binding: str, version: str
) -> None:
    client = await make_client(agent_url, binding, version, streaming=True)
    watcher = await make_client(agent_url, binding, version, streaming=True)
    try:
        stream = client.send_message(request("out.work", {"seconds": 30}))
        first = await anext(stream)
        assert first.WhichOneof("payload") == "task"
        task_id = first.task.id
        second = await anext(stream)
        assert second.status_update.status.state == WORKING
        watched = watcher.subscribe(SubscribeToTaskRequest(id=task_id))
        current = await anext(watched)
        assert current.task.status.state == WORKING
        await watcher.cancel_task(CancelTaskRequest(id=task_id))
        async with asyncio.timeout(10):
            last = [e async for e in stream][-1]
            assert last.status_update.status.state == CANCELED
            seen = [e async for e in watched][-1]
            assert seen.status_update.status.state == CANCELED
    finally:
        await client.close()
        await watcher.close()


async def test_a_chosen_task_is_pushed_while_it_runs() -> None:
    async with receiver() as hooks:
        with serve_outputs(push_notifications=True, push_allow_insecure_urls=True) as url:
            client = await make_client(url, "JSONRPC", "1.0")
            try:
                req = request("out.work", {"seconds": 30}, return_immediately=True)
                req.configuration.task_push_notification_config.url = hooks.url("/work")
                started = await send(client, req)
                assert isinstance(started, Task)

                def states() -> list[str]:
                    found = []
                    for delivery in hooks.accepted("/work"):
                        event = delivery.event
                        body = event.get("task") or event.get("statusUpdate") or {}
                        found.append(body.get("status", {}).get("state"))
                    return found

                await hooks.wait_for(lambda: "TASK_STATE_WORKING" in states())
                await client.cancel_task(CancelTaskRequest(id=started.id))
                await hooks.wait_for(lambda: "TASK_STATE_CANCELED" in states())
            finally:
                await client.close()
