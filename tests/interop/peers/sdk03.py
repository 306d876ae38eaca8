"""Peer: the genuine a2a-sdk 0.3.x client (its own virtualenv), on one binding.

Run by the interop suite as its own process with the 0.3 environment's interpreter; prints
one JSON report (see ``_harness.py``). The 0.3 client speaks only protocol 0.3 and has no
calls for ListTasks or for listing/deleting push configs: those cells report
``offered: false``.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from typing import Any

import grpc.aio
import httpx
from _harness import FILES, Report, file_facts, parse_args, wait_for_delivery
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    DataPart,
    FilePart,
    FileWithBytes,
    GetTaskPushNotificationConfigParams,
    Message,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskState,
    TextPart,
)

TERMINAL = {TaskState.completed, TaskState.canceled, TaskState.failed, TaskState.rejected}


def message(
    skill: str | None, *parts: Any, task_id: str | None = None, context_id: str | None = None
) -> Message:
    return Message(
        role=Role.user,
        message_id=uuid.uuid4().hex,
        parts=[Part(root=p) for p in parts],
        task_id=task_id,
        context_id=context_id,
        metadata={"skillId": skill} if skill else None,
    )


def parts_json(parts: list[Part]) -> list[dict[str, Any]]:
    return [p.root.model_dump(mode="json", exclude_none=True) for p in parts]


class Peer:
    def __init__(self, card: AgentCard, binding: str) -> None:
        def make(streaming: bool, polling: bool = False) -> Any:
            config = ClientConfig(
                streaming=streaming,
                polling=polling,
                supported_transports=[binding],
                grpc_channel_factory=grpc.aio.insecure_channel,
            )
            return ClientFactory(config).create(card)

        self.client = make(False)
        self.polling = make(False, polling=True)
        self.streaming = make(True)

    @staticmethod
    async def _last(client: Any, msg: Message) -> Any:
        result = None
        async for event in client.send_message(msg):
            result = event
        if isinstance(result, tuple):
            return result[0]
        if result is None:
            raise RuntimeError("no response")
        return result

    async def send(self, msg: Message) -> Any:
        return await self._last(self.client, msg)

    async def start(self, skill: str, value: dict[str, Any]) -> Task:
        task: Task = await self._last(self.polling, message(skill, DataPart(data=value)))
        return task

    async def release(self, key: str) -> None:
        await self.send(message("interop.hold", DataPart(data={"key": key, "release": True})))

    async def wait_terminal(self, task_id: str, timeout: float = 30) -> Task:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            task = await self.client.get_task(TaskQueryParams(id=task_id))
            if task.status.state in TERMINAL or loop.time() > deadline:
                return task
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        for client in (self.client, self.polling, self.streaming):
            await client.close()


async def main() -> None:
    args = parse_args()
    report = Report("a2a-sdk 0.3", args)
    shared: dict[str, Any] = {}

    async def card() -> dict[str, Any]:
        async with httpx.AsyncClient() as http:
            fetched = await A2ACardResolver(http, args.url).get_agent_card()
        shared["card"] = fetched
        transports = [fetched.preferred_transport] + [
            i.transport for i in fetched.additional_interfaces or []
        ]
        return {
            "name": fetched.name,
            "protocol_version": fetched.protocol_version,
            "transports": sorted(set(map(str, transports))),
            "skills": sorted(s.id for s in fetched.skills),
        }

    await report.op("card", card)
    if args.version != "0.3":
        raise SystemExit("the 0.3 client speaks only protocol 0.3")
    if "card" in shared:
        peer = Peer(shared["card"], args.binding)
        try:
            await run_ops(report, peer, args, shared)
        finally:
            await peer.close()
    report.emit()


async def run_ops(report: Report, peer: Peer, args: Any, shared: dict[str, Any]) -> None:
    run = args.run

    async def send() -> dict[str, Any]:
        task = await peer.send(message("interop.echo", TextPart(text="hello interop")))
        shared["task"] = task
        return {
            "state": task.status.state.value,
            "artifacts": [parts_json(a.parts) for a in task.artifacts or []],
        }

    await report.op("send", send)

    for name, payload in FILES.items():

        async def send_file(payload: bytes = payload, name: str = name) -> dict[str, Any]:
            encoded = base64.b64encode(payload).decode("ascii")
            part = FilePart(
                file=FileWithBytes(bytes=encoded, mime_type="application/octet-stream", name=name)
            )
            task = await peer.send(message("interop.files", part))
            got = parts_json(task.artifacts[0].parts)[0].get("data", {}) if task.artifacts else {}
            return {"state": task.status.state.value, "module": got, "sent": file_facts(payload)}

        await report.op(f"file_{name}", send_file)

    async def stream() -> dict[str, Any]:
        events: list[list[Any]] = []
        async for event in peer.streaming.send_message(
            message("interop.count", DataPart(data={"start": 3}))
        ):
            if isinstance(event, Message):
                events.append(["message", None])
                continue
            task, update = event
            if update is None:
                events.append(["task", task.status.state.value])
            elif update.kind == "artifact-update":
                events.append(["artifact_update", parts_json(update.artifact.parts)])
            else:
                events.append(["status_update", update.status.state.value])
        return {"events": events}

    await report.op("stream", stream)

    async def get() -> dict[str, Any]:
        task = await peer.client.get_task(TaskQueryParams(id=shared["task"].id, history_length=10))
        return {
            "same_id": task.id == shared["task"].id,
            "state": task.status.state.value,
            "history": len(task.history or []),
        }

    if "task" in shared:
        await report.op("get", get)
    report.skip("list", "A2A 0.3 has no ListTasks")

    async def cancel() -> dict[str, Any]:
        started = await peer.start("interop.hold", {"key": f"{run}-cancel"})
        canceled = await peer.client.cancel_task(TaskIdParams(id=started.id))
        return {"state": canceled.status.state.value}

    await report.op("cancel", cancel)

    async def resubscribe() -> dict[str, Any]:
        key = f"{run}-resubscribe"
        started = await peer.start("interop.hold", {"key": key})
        stream = peer.streaming.resubscribe(TaskIdParams(id=started.id))
        first = await anext(stream)
        kinds = ["task" if first[1] is None else first[1].kind]
        await peer.release(key)
        last_state = None
        async for task, update in stream:
            kinds.append("task" if update is None else update.kind)
            last_state = task.status.state.value
        return {"first": kinds[0], "last_state": last_state, "events": len(kinds)}

    await report.op("resubscribe", resubscribe)
    await push_ops(report, peer, args)

    async def approval() -> dict[str, Any]:
        parked = await peer.send(message("interop.approve", DataPart(data={"amount": 5})))
        asked = parked.status.state.value
        done = await peer.send(
            message(
                None,
                DataPart(data={"approved": True}),
                task_id=parked.id,
                context_id=parked.context_id,
            )
        )
        parts = [p for a in done.artifacts or [] for p in parts_json(a.parts)]
        return {"asked": asked, "state": done.status.state.value, "parts": parts}

    await report.op("approval", approval)


async def push_ops(report: Report, peer: Peer, args: Any) -> None:
    run = args.run
    key = f"{run}-push"
    url = f"{args.webhook}/hook/{run}"
    holder: dict[str, Any] = {}

    async def push_set() -> dict[str, Any]:
        started = await peer.start("interop.hold", {"key": key})
        holder["task"] = started.id
        created = await peer.client.set_task_callback(
            TaskPushNotificationConfig(
                task_id=started.id,
                push_notification_config=PushNotificationConfig(url=url, token=f"token-{run}"),
            )
        )
        config = created.push_notification_config
        holder["id"] = config.id
        return {"has_id": bool(config.id), "url": config.url, "token": config.token}

    report.skip("push_list", "the 0.3 client has no call to list push configs")
    report.skip("push_delete", "the 0.3 client has no call to delete push configs")
    await report.op("push_set", push_set)
    if not holder.get("id"):
        return

    async def push_get() -> dict[str, Any]:
        got = await peer.client.get_task_callback(
            GetTaskPushNotificationConfigParams(
                id=holder["task"], push_notification_config_id=holder["id"]
            )
        )
        config = got.push_notification_config
        return {"same_id": config.id == holder["id"], "url": config.url}

    await report.op("push_get", push_get)

    async def push_delivery() -> dict[str, Any]:
        await peer.release(key)
        task = await peer.wait_terminal(holder["task"])
        got = await wait_for_delivery(args.webhook, run, lambda d: "completed" in str(d).lower())
        return {"task": holder["task"], "state": task.status.state.value, "deliveries": len(got)}

    await report.op("push_delivery", push_delivery)


if __name__ == "__main__":
    asyncio.run(main())
