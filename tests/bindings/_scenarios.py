"""The scenario suite: each scenario drives one :class:`Peer` and returns normalized data.

Scenarios never look at which binding they run on; the parity tests run every scenario
unchanged over every transport and compare the results field by field.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)

from tests.bindings import _resume
from tests.bindings._agent import GATES
from tests.bindings._normalize import Ids, normalize
from tests.bindings._peers import Peer, data, message, send, text

Scenario = Callable[[Peer], Awaitable[Any]]
UNKNOWN_TASK = "no-such-task-0000"
# The agent may not call this URL (the SSRF policy allows it only because the test agent
# enables insecure URLs); nothing listens there, and configs are only stored.
HOOK_URL = "http://127.0.0.1:9/hook"


async def outcome(call: Awaitable[Any]) -> Any:
    """The call's result, or the exception it raised (normalized later like a result)."""
    try:
        return await call
    except Exception as exc:
        return exc


async def collect(stream: Any) -> list[Any]:
    events = []
    try:
        async for event in stream:
            events.append(event)
    except Exception as exc:
        events.append(exc)
    return events


async def send_text(peer: Peer) -> Any:
    return normalize(await send(peer, message(text("hello"), skill="demo.echo")))


async def send_data(peer: Peer) -> Any:
    return normalize(await send(peer, message(data({"a": 2, "b": 40}), skill="demo.add")))


async def stream(peer: Peer) -> Any:
    request = message(data({"start": 3}), skill="demo.countdown")
    return normalize(await collect(peer.streaming.send_message(request, context=peer.call_context)))


async def get(peer: Peer) -> Any:
    task = await send(peer, message(text("kept"), skill="demo.echo"))
    ids = Ids()
    normalize(task, ids)  # the task's ids get the same placeholders in every run
    full = await peer.client.get_task(
        GetTaskRequest(id=task.id, history_length=10), context=peer.call_context
    )
    trimmed = await peer.client.get_task(
        GetTaskRequest(id=task.id, history_length=0), context=peer.call_context
    )
    return {"full": normalize(full, ids), "without_history": normalize(trimmed, ids)}


async def list_tasks(peer: Peer) -> Any:
    first = await send(peer, message(text("one"), skill="demo.echo"))
    listed = await outcome(
        peer.client.list_tasks(
            ListTasksRequest(context_id=first.context_id, history_length=1),
            context=peer.call_context,
        )
    )
    ids = Ids()
    normalize(first, ids)
    return normalize(listed, ids)


async def _running_gate(peer: Peer) -> tuple[Any, str]:
    key = uuid.uuid4().hex
    task = await send(peer, message(data({"key": key}), skill="demo.gate", return_immediately=True))
    await GATES.wait_started(key)
    return task, key


async def subscribe(peer: Peer) -> Any:
    task, key = await _running_gate(peer)
    events: list[Any] = []
    try:
        async for event in peer.streaming.subscribe(
            SubscribeToTaskRequest(id=task.id), context=peer.call_context
        ):
            events.append(event)
            if len(events) == 1:
                GATES.release(key)  # only now: the first event is the live snapshot
    except Exception as exc:
        events.append(exc)
    finally:
        GATES.release(key)
    ids = Ids()
    return {"submitted": normalize(task, ids), "events": normalize(events, ids)}


async def cancel(peer: Peer) -> Any:
    task, key = await _running_gate(peer)
    ids = Ids()
    try:
        canceled = await outcome(
            peer.client.cancel_task(CancelTaskRequest(id=task.id), context=peer.call_context)
        )
        fetched = await peer.client.get_task(
            GetTaskRequest(id=task.id, history_length=10), context=peer.call_context
        )
        again = await outcome(
            peer.client.cancel_task(CancelTaskRequest(id=task.id), context=peer.call_context)
        )
    finally:
        GATES.release(key)
    return {
        "submitted": normalize(task, ids),
        "canceled": normalize(canceled, ids),
        "fetched": normalize(fetched, ids),
        "cancel_again": normalize(again, ids),
    }


async def cancel_completed(peer: Peer) -> Any:
    task = await send(peer, message(text("done"), skill="demo.echo"))
    return normalize(
        await outcome(
            peer.client.cancel_task(CancelTaskRequest(id=task.id), context=peer.call_context)
        )
    )


async def push_config_crud(peer: Peer) -> Any:
    task = await send(peer, message(text("hooked"), skill="demo.echo"))
    ids = Ids()
    normalize(task, ids)
    ctx = peer.call_context
    config = TaskPushNotificationConfig(task_id=task.id, id="hook-1", url=HOOK_URL, token="t-1")
    created = await outcome(peer.client.create_task_push_notification_config(config, context=ctx))
    got = await outcome(
        peer.client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1"), context=ctx
        )
    )
    listed = await outcome(
        peer.client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id), context=ctx
        )
    )
    deleted = await outcome(
        peer.client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1"), context=ctx
        )
    )
    after = await outcome(
        peer.client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id), context=ctx
        )
    )
    return {
        "created": normalize(created, ids),
        "got": normalize(got, ids),
        "listed": normalize(listed, ids),
        "deleted": normalize(deleted, ids),
        "after_delete": normalize(after, ids),
    }


async def unknown_task(peer: Peer) -> Any:
    ctx = peer.call_context
    return {
        "get": normalize(
            await outcome(peer.client.get_task(GetTaskRequest(id=UNKNOWN_TASK), context=ctx))
        ),
        "cancel": normalize(
            await outcome(peer.client.cancel_task(CancelTaskRequest(id=UNKNOWN_TASK), context=ctx))
        ),
        "subscribe": normalize(
            await collect(
                peer.streaming.subscribe(SubscribeToTaskRequest(id=UNKNOWN_TASK), context=ctx)
            )
        ),
    }


async def bad_params(peer: Peer) -> Any:
    return {
        "wrong_type": normalize(
            await outcome(send(peer, message(data({"a": "x", "b": 1}), skill="demo.add")))
        ),
        "missing_field": normalize(
            await outcome(send(peer, message(data({"a": 1}), skill="demo.add")))
        ),
        "unknown_skill": normalize(
            await outcome(send(peer, message(text("hi"), skill="demo.nope")))
        ),
    }


async def resume_stream(peer: Peer) -> Any:
    """A message stream dropped after 3 events, resumed by a subscription with the last id
    it saw: the two connections carry every event once, in order, with rising ids. gRPC
    streams carry no ids (see PARITY_EXCEPTIONS in test_parity.py): nothing to resume by."""
    first, task_id = await _resume.stream_message(
        peer.binding, peer.version, peer.url, start=5, cut_after=3
    )
    last_id = first[-1][0]
    rest = []
    if peer.binding != "GRPC":
        rest = await _resume.resume(peer.binding, peer.version, peer.url, task_id, last_id)
    ids = [event_id for event_id, _s in first + rest]
    rising = all(i is not None and i.isdigit() for i in ids) and [
        int(i or 0) for i in ids
    ] == sorted({int(i or 0) for i in ids})
    return {
        "first": [s for _i, s in first],
        "rest": [s for _i, s in rest],
        "ids_rise": rising,
    }


async def route_by_schema(peer: Peer) -> Any:
    """No skillId: the one skill whose schema accepts the data gets it; text that two
    skills accept is refused (-32602 or the binding's equivalent)."""
    routed = await send(peer, message(data({"a": 2, "b": 40}), skill=None))
    ambiguous = await outcome(send(peer, message(text("hi"), skill=None)))
    return {"routed": normalize(routed), "ambiguous": normalize(ambiguous)}


SCENARIOS: dict[str, Scenario] = {
    "send_text": send_text,
    "send_data": send_data,
    "stream": stream,
    "get": get,
    "list": list_tasks,
    "subscribe": subscribe,
    "cancel": cancel,
    "cancel_completed": cancel_completed,
    "push_config_crud": push_config_crud,
    "unknown_task": unknown_task,
    "bad_params": bad_params,
    "resume_stream": resume_stream,
    "route_by_schema": route_by_schema,
}
