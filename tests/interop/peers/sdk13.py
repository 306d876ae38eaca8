"""Peer: the official a2a-sdk 1.3 client, pinned to one binding and protocol version.

Run by the interop suite as its own process (``python sdk13.py --url ... --binding GRPC
--version 0.3 ...``); prints one JSON report on stdout (see ``_harness.py``). It imports
nothing of apcore-a2a: it is a client exactly as a user would write it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc.aio
import httpx
from _harness import FILES, Report, file_facts, parse_args, wait_for_delivery
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
}


def state(value: int) -> str:
    return str(TaskState.Name(value))


def message(
    skill: str | None, *parts: Part, task_id: str = "", context_id: str = ""
) -> SendMessageRequest:
    msg = Message(
        role=Role.ROLE_USER,
        message_id=uuid.uuid4().hex,
        parts=list(parts),
        task_id=task_id,
        context_id=context_id,
    )
    if skill:
        msg.metadata.update({"skillId": skill})
    return SendMessageRequest(message=msg)


def data(value: dict[str, Any]) -> Part:
    part = Part()
    part.data.struct_value.update(value)
    return part


def pinned(card: AgentCard, binding: str, version: str) -> AgentCard:
    """The card with only the interface this peer must use (so the SDK cannot pick another)."""
    keep = [
        i
        for i in card.supported_interfaces
        if i.protocol_binding == binding and i.protocol_version == version
    ]
    if not keep:
        raise LookupError(f"the card declares no {binding} {version} interface")
    out = AgentCard()
    out.CopyFrom(card)
    del out.supported_interfaces[:]
    out.supported_interfaces.extend(keep)
    return out


class Peer:
    def __init__(self, card: AgentCard, binding: str, version: str) -> None:
        def make(streaming: bool) -> Any:
            config = ClientConfig(
                streaming=streaming,
                supported_protocol_bindings=[binding],
                grpc_channel_factory=grpc.aio.insecure_channel,
            )
            return ClientFactory(config).create(pinned(card, binding, version))

        self.client = make(False)
        self.streaming = make(True)

    async def send(self, request: SendMessageRequest) -> Any:
        result = None
        async for response in self.client.send_message(request):
            result = response
        if result is None:
            raise RuntimeError("no response")
        return result.task if result.HasField("task") else result.message

    async def start(self, skill: str, value: dict[str, Any]) -> Any:
        request = message(skill, data(value))
        request.configuration.return_immediately = True
        return await self.send(request)

    async def release(self, key: str) -> None:
        await self.send(message("interop.hold", data({"key": key, "release": True})))

    async def wait_terminal(self, task_id: str, timeout: float = 30) -> Any:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            task = await self.client.get_task(GetTaskRequest(id=task_id))
            if task.status.state in TERMINAL or asyncio.get_running_loop().time() > deadline:
                return task
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        await self.client.close()
        await self.streaming.close()


async def main() -> None:
    args = parse_args()
    report = Report("a2a-sdk 1.3", args)
    run = args.run
    shared: dict[str, Any] = {}

    async def card() -> dict[str, Any]:
        async with httpx.AsyncClient() as http:
            fetched = await A2ACardResolver(http, args.url).get_agent_card()
        shared["card"] = fetched
        return {
            "name": fetched.name,
            "interfaces": sorted(
                f"{i.protocol_binding} {i.protocol_version}" for i in fetched.supported_interfaces
            ),
            "skills": sorted(s.id for s in fetched.skills),
        }

    await report.op("card", card)
    if "card" not in shared:
        report.emit()
        return
    peer = Peer(shared["card"], args.binding, args.version)
    try:
        await run_ops(report, peer, args, run, shared)
    finally:
        await peer.close()
    report.emit()


async def run_ops(report: Report, peer: Peer, args: Any, run: str, shared: dict[str, Any]) -> None:
    async def send() -> dict[str, Any]:
        task = await peer.send(message("interop.echo", Part(text="hello interop")))
        shared["task"] = task
        return {
            "state": state(task.status.state),
            "artifacts": [MessageToDict(a)["parts"] for a in task.artifacts],
        }

    await report.op("send", send)

    for name, payload in FILES.items():

        async def send_file(payload: bytes = payload, name: str = name) -> dict[str, Any]:
            part = Part(raw=payload, media_type="application/octet-stream", filename=name)
            task = await peer.send(message("interop.files", part))
            got = MessageToDict(task.artifacts[0])["parts"][0]["data"] if task.artifacts else {}
            return {"state": state(task.status.state), "module": got, "sent": file_facts(payload)}

        await report.op(f"file_{name}", send_file)

    async def stream() -> dict[str, Any]:
        events = []
        async for response in peer.streaming.send_message(
            message("interop.count", data({"start": 3}))
        ):
            kind = response.WhichOneof("payload")
            item = getattr(response, kind)
            if kind == "artifact_update":
                events.append([kind, MessageToDict(item.artifact).get("parts", [])])
            elif kind in ("status_update", "task"):
                events.append([kind, state(item.status.state)])
            else:
                events.append([kind, None])
        return {"events": events}

    await report.op("stream", stream)

    async def get() -> dict[str, Any]:
        task = await peer.client.get_task(GetTaskRequest(id=shared["task"].id, history_length=10))
        return {
            "same_id": task.id == shared["task"].id,
            "state": state(task.status.state),
            "history": len(task.history),
        }

    if "task" in shared:
        await report.op("get", get)

    async def list_tasks() -> dict[str, Any]:
        page = await peer.client.list_tasks(ListTasksRequest(page_size=100))
        return {"contains_task": any(t.id == shared["task"].id for t in page.tasks)}

    if args.version == "0.3":
        report.skip("list", "A2A 0.3 has no ListTasks")
    elif "task" in shared:
        await report.op("list", list_tasks)

    async def cancel() -> dict[str, Any]:
        started = await peer.start("interop.hold", {"key": f"{run}-cancel"})
        canceled = await peer.client.cancel_task(CancelTaskRequest(id=started.id))
        return {"state": state(canceled.status.state)}

    await report.op("cancel", cancel)

    async def resubscribe() -> dict[str, Any]:
        key = f"{run}-resubscribe"
        started = await peer.start("interop.hold", {"key": key})
        events = []
        stream = peer.streaming.subscribe(SubscribeToTaskRequest(id=started.id))
        first = await anext(stream)
        events.append([first.WhichOneof("payload"), None])
        await peer.release(key)
        async for response in stream:
            kind = response.WhichOneof("payload")
            item = getattr(response, kind)
            events.append([kind, state(item.status.state) if kind == "status_update" else None])
        return {"first": events[0][0], "last_state": events[-1][1], "events": len(events)}

    await report.op("resubscribe", resubscribe)

    await push_ops(report, peer, args, run)

    async def approval() -> dict[str, Any]:
        parked = await peer.send(message("interop.approve", data({"amount": 5})))
        asked = state(parked.status.state)
        done = await peer.send(
            message(None, data({"approved": True}), task_id=parked.id, context_id=parked.context_id)
        )
        parts = [MessageToDict(p) for a in done.artifacts for p in a.parts]
        return {"asked": asked, "state": state(done.status.state), "parts": parts}

    await report.op("approval", approval)


async def push_ops(report: Report, peer: Peer, args: Any, run: str) -> None:
    key = f"{run}-push"
    url = f"{args.webhook}/hook/{run}"
    holder: dict[str, Any] = {}

    async def push_set() -> dict[str, Any]:
        started = await peer.start("interop.hold", {"key": key})
        holder["task"] = started.id
        created = await peer.client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=started.id, url=url, token=f"token-{run}")
        )
        holder["id"] = created.id
        return {"has_id": bool(created.id), "url": created.url, "token": created.token}

    await report.op("push_set", push_set)
    if "id" not in holder:
        return

    async def push_get() -> dict[str, Any]:
        got = await peer.client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=holder["task"], id=holder["id"])
        )
        return {"same_id": got.id == holder["id"], "url": got.url}

    await report.op("push_get", push_get)

    async def push_list() -> dict[str, Any]:
        page = await peer.client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=holder["task"])
        )
        return {"ids": [c.id == holder["id"] for c in page.configs]}

    await report.op("push_list", push_list)

    async def push_delivery() -> dict[str, Any]:
        await peer.release(key)
        task = await peer.wait_terminal(holder["task"])
        got = await wait_for_delivery(args.webhook, run, lambda d: "completed" in str(d).lower())
        return {"task": holder["task"], "state": state(task.status.state), "deliveries": len(got)}

    await report.op("push_delivery", push_delivery)

    async def push_delete() -> dict[str, Any]:
        await peer.client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=holder["task"], id=holder["id"])
        )
        page = await peer.client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=holder["task"])
        )
        return {"left": len(page.configs)}

    await report.op("push_delete", push_delete)


if __name__ == "__main__":
    asyncio.run(main())
