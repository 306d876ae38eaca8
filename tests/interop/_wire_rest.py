"""The wire audit's REST corpus: every route of the cell's version (``/v1`` for 0.3), good
and bad inputs, and the public card (``_wire_corpus.py`` records the answers)."""

from __future__ import annotations

import uuid
from typing import Any

from tests.bindings._agent import GATES
from tests.interop._wire_corpus import (
    GUEST_KEY,
    QUOTA_KEY,
    UNUSED_HOOK,
    Exchange,
    HttpCell,
    gated,
    message,
    proto03_message,
    task_id_of,
)


async def rest_corpus(cell: HttpCell) -> None:
    """Every REST route of the cell's version, good and bad inputs."""
    v03 = cell.version == "0.3"
    root = "/v1" if v03 else ""

    def msg(skill: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
        return proto03_message(skill, parts) if v03 else message(skill, parts, False)

    def send_body(skill: str, parts: list[dict[str, Any]], wait: bool = True) -> dict[str, Any]:
        body: dict[str, Any] = {"message": msg(skill, parts)}
        if not wait:
            body["configuration"] = {"blocking": False} if v03 else {"returnImmediately": True}
        return body

    async def send(
        label: str, body: dict[str, Any], expect: str = "SendMessageResponse", **kw: Any
    ) -> Exchange:
        return await cell.http(label, "POST", root + "/message:send", expect, body, **kw)

    async def send_gate(gate: str, key: str, label: str = "send (gated)") -> Exchange:
        body = send_body("demo.gate", [{"data": {"key": gate}}], False)
        return await send(label, body, "" if "quota" in label else "SendMessageResponse", key=key)

    done = task_id_of(await send("send", send_body("demo.echo", [{"text": "hi"}])))
    await send("send (bad input)", send_body("demo.add", [{"data": {"a": "x"}}]), "")
    await send("send (unknown skill)", send_body("nope.none", [{"text": "x"}]), "")
    await send("send (module fails)", send_body("audit.fail", [{"text": "x"}]))
    asked = task_id_of(await send("send (input-required)", send_body("audit.ask", [{"text": "x"}])))
    await send("send (no parts)", send_body("demo.echo", []), "")
    await send("send (bad params)", {"message": 5}, "")
    await cell.http(
        "stream",
        "POST",
        root + "/message:stream",
        "StreamResponse",
        send_body("demo.countdown", [{"data": {"start": 2}}]),
    )
    await cell.http("get", "GET", f"{root}/tasks/{done}?historyLength=1", "Task")
    await cell.http("get (unknown task)", "GET", f"{root}/tasks/{uuid.uuid4().hex}", "")
    await cell.http("get (bad historyLength)", "GET", f"{root}/tasks/{done}?historyLength=x", "")
    if not v03:
        await cell.http("list", "GET", "/tasks?pageSize=2", "ListTasksResponse")
        await cell.http("list (bad status)", "GET", "/tasks?status=99", "")
    await cell.http("cancel (input-required)", "POST", f"{root}/tasks/{asked}:cancel", "Task")
    await cell.http("cancel (finished)", "POST", f"{root}/tasks/{done}:cancel", "")
    await cell.http("cancel (unknown task)", "POST", f"{root}/tasks/{uuid.uuid4().hex}:cancel", "")
    gate, running = await gated(send_gate)
    subscribe = f"{root}/tasks/{running}:subscribe"

    async def second_stream() -> None:
        # The caller holds its one stream: a second one is over its quota (429).
        await cell.http("subscribe (over the stream quota)", "GET", subscribe, "")
        GATES.release(gate)

    await cell.http("subscribe", "GET", subscribe, "StreamResponse", while_open=second_stream)
    await cell.http("subscribe (finished)", "GET", f"{root}/tasks/{done}:subscribe", "")
    gate, running = await gated(send_gate)
    configs = f"{root}/tasks/{running}/pushNotificationConfigs"

    def push_config(config_id: str, url: str) -> dict[str, Any]:
        config = {"id": config_id, "url": url, "token": "t0k"}
        name = f"tasks/{running}/pushNotificationConfigs/{config_id}"
        return (
            {"name": name, "pushNotificationConfig": config}
            if v03
            else {"taskId": running, **config}
        )

    body = push_config("c1", cell.hook)
    await cell.http("push set", "POST", configs, "TaskPushNotificationConfig", body)
    await cell.http("push get", "GET", configs + "/c1", "TaskPushNotificationConfig")
    await cell.http("push get (unknown config)", "GET", configs + "/nope", "")
    await cell.http("push list", "GET", configs, "ListTaskPushNotificationConfigsResponse")
    unused = push_config("c2", UNUSED_HOOK)
    await cell.http("push set", "POST", configs, "TaskPushNotificationConfig", unused)
    await cell.http("push delete", "DELETE", configs + "/c2", "Empty")
    bad = (
        {**body, "pushNotificationConfig": {"url": "ftp://x"}}
        if v03
        else {**body, "url": "ftp://x"}
    )
    await cell.http("push set (bad url)", "POST", configs, "", bad)
    await cell.http("cancel (running)", "POST", f"{root}/tasks/{running}:cancel", "Task")
    GATES.release(gate)
    await cell.http(
        "extended card", "GET", "/v1/card" if v03 else "/extendedAgentCard", "AgentCard"
    )
    await cell.http("unknown route", "GET", f"{root}/frobnicate/x/y", "")
    await cell.http("wrong HTTP method", "DELETE", f"{root}/message:send", "")
    await cell.http("wrong version", "GET", f"{root}/tasks/{done}", "", version="2.0")
    await cell.http("unauthenticated", "GET", f"{root}/tasks/{done}", "", key=None)
    await cell.http("bad key", "GET", f"{root}/tasks/{done}", "", key="wrong")
    await cell.http("forbidden", "GET", f"{root}/tasks/{done}", "", key=GUEST_KEY)
    await cell.http("not JSON", "POST", root + "/message:send", "", raw=b"{nope")
    await cell.http(
        "oversized", "POST", root + "/message:send", "", raw=b'{"x": "' + b"a" * 70_000 + b'"}'
    )
    gates = [await gated(send_gate, QUOTA_KEY) for _ in range(2)]
    await send_gate(uuid.uuid4().hex, QUOTA_KEY, "send (over the task quota)")
    for gate, running in gates:
        await cell.http(
            "cancel (running)", "POST", f"{root}/tasks/{running}:cancel", "Task", key=QUOTA_KEY
        )
        GATES.release(gate)


async def card_corpus(cell: HttpCell) -> None:
    """The public card, in the form the cell's version asks for."""
    await cell.http("card", "GET", "/.well-known/agent-card.json", "AgentCard", key=None)
