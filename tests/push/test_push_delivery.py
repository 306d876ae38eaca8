"""Webhook delivery through a real agent to a real receiver: retries, order, signatures."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest

from tests._support import TLS

from ._agent import (
    GATES,
    V1,
    SlowAdd,
    add_message,
    demo_registry,
    push_agent,
    push_receiver,
    receiver,
    rpc,
    statuses,
)


def _summary(event: dict[str, Any]) -> tuple[str, str]:
    """(kind, state or artifact name) - what must match between two event sequences."""
    kind, body = next(iter(event.items()))
    if kind == "artifactUpdate":
        return kind, str(body["artifact"].get("name"))
    return kind, str(body["status"]["state"])


async def _streamed_summary(client: httpx.AsyncClient, base: str) -> list[tuple[str, str]]:
    """The events of the same kind of task, as SendStreamingMessage reports them."""
    payload = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "SendStreamingMessage",
        "params": {"message": add_message()},
    }
    out: list[tuple[str, str]] = []
    async with client.stream("POST", base + "/", json=payload, headers=V1) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                out.append(_summary(json.loads(line[5:])["result"]))
    return out


async def test_flaky_receiver_gets_every_event_once_in_order_after_1s_2s_retries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="apcore_a2a.push")
    async with (
        receiver(fail_first={"/flaky": 2}) as rec,
        push_agent() as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        hook = rec.url("/flaky")
        reply = await rpc(
            client,
            base,
            "SendMessage",
            {
                "message": add_message(),
                "configuration": {"taskPushNotificationConfig": {"url": hook, "token": "tok-1"}},
            },
        )
        task = reply["result"]["task"]
        # The failing receiver does not hold the task up: it is done while its first event
        # still waits for the retries that will deliver it (1 s + 2 s later).
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert rec.accepted("/flaky") == []

        expected = await _streamed_summary(client, base)
        await rec.wait_for(lambda: len(rec.accepted("/flaky")) == len(expected))
        sender = app.state.a2a.extras["push"].sender
        await sender.idle()

        accepted = rec.accepted("/flaky")
        assert [_summary(d.event) for d in accepted] == expected
        assert expected[0] == ("task", "TASK_STATE_SUBMITTED")
        assert expected[-1] == ("statusUpdate", "TASK_STATE_COMPLETED")
        assert all(
            d.event[next(iter(d.event))].get("taskId", task["id"]) == task["id"] for d in accepted
        )
        assert len({d.body for d in accepted}) == len(accepted)

        # The first event was tried 3 times, 1 s then 2 s apart; nothing else was retried.
        attempts = rec.attempts("/flaky")
        assert [d.status for d in attempts[:3]] == [500, 500, 204]
        assert attempts[0].body == attempts[1].body == attempts[2].body
        assert len(attempts) == len(expected) + 2
        # The sender scheduled the retries 1 s and 2 s out, and the receiver saw them no
        # sooner (a busy machine can only make the gaps longer).
        retries = [r for r in caplog.records if "retry" in r.getMessage()]
        assert [r.levelno for r in retries] == [logging.WARNING, logging.WARNING]
        assert [r.getMessage().rsplit("retry ", 1)[1] for r in retries] == [
            "1/3 in 1.0 s",
            "2/3 in 2.0 s",
        ]
        gap1 = attempts[1].at - attempts[0].at
        gap2 = attempts[2].at - attempts[1].at
        assert gap1 >= 0.9, gap1
        assert gap2 >= 1.9, gap2
        assert (sender.sent, sender.failed, sender.retried) == (len(expected), 0, 2)

        # Every delivery verifies against the JWKS fetched from the agent; retries of one
        # delivery share its jti, different deliveries do not.
        verifier = push_receiver.DeliveryVerifier(base, hook, token="tok-1")
        claims = [await verifier.verify(d.headers, d.body) for d in accepted]
        assert {c["task_id"] for c in claims} == {task["id"]}
        assert {c["iss"] for c in claims} == {base}
        assert len({c["jti"] for c in claims}) == len(claims)
        first_try = await verifier.verify(attempts[0].headers, attempts[0].body)
        assert first_try["jti"] == claims[0]["jti"]
        assert all(d.headers["x-a2a-notification-token"] == "tok-1" for d in attempts)
        assert all(d.headers["content-type"] == "application/json" for d in attempts)

        # A tampered body, a wrong audience, a wrong token and a missing JWT all fail.
        tampered = accepted[-1].body.replace(b"TASK_STATE_COMPLETED", b"TASK_STATE_FAILED")
        assert tampered != accepted[-1].body
        with pytest.raises(push_receiver.DeliveryRejected, match="body_sha256"):
            await verifier.verify(accepted[-1].headers, tampered)
        other = push_receiver.DeliveryVerifier(base, rec.url("/other"))
        with pytest.raises(push_receiver.DeliveryRejected, match=r"(?i)audience"):
            await other.verify(accepted[-1].headers, accepted[-1].body)
        wrong_token = push_receiver.DeliveryVerifier(base, hook, token="nope")
        with pytest.raises(push_receiver.DeliveryRejected, match="token mismatch"):
            await wrong_token.verify(accepted[-1].headers, accepted[-1].body)
        with pytest.raises(push_receiver.DeliveryRejected, match="missing x-a2a-signature"):
            await verifier.verify({}, accepted[-1].body)
        # The signature has its own header: Authorization is the config's (it has none).
        assert all("authorization" not in d.headers for d in attempts)


async def test_always_failing_receiver_marks_the_config_failed() -> None:
    async with (
        receiver(always={"/dead": 503}) as rec,
        push_agent(push_retry_delays=(0.05, 0.1, 0.2)) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        reply = await rpc(
            client,
            base,
            "SendMessage",
            {
                "message": add_message(),
                "configuration": {
                    "taskPushNotificationConfig": {"id": "c1", "url": rec.url("/dead")}
                },
            },
        )
        task_id = reply["result"]["task"]["id"]
        assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        sender = app.state.a2a.extras["push"].sender
        await sender.idle()

        # 1 try + 3 retries of the first event, then the config is dead: later events dropped.
        assert len(rec.attempts("/dead")) == 4
        assert sender.failed == 1
        assert sender.sent == 0
        assert sender.retried == 3
        assert sender.dropped >= 2

        got = await rpc(
            client, base, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "c1"}
        )
        assert got["result"]["url"] == rec.url("/dead")
        assert await statuses(client, base, task_id) == {
            "c1": ("failed", "HTTP 503 (after 4 attempts)")
        }

        # Registering the config again re-enables it.
        again = await rpc(
            client,
            base,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": "c1", "url": rec.url("/alive")},
        )
        assert again["result"]["url"] == rec.url("/alive")
        assert await statuses(client, base, task_id) == {"c1": ("active", None)}


async def test_client_error_is_not_retried() -> None:
    async with (
        receiver(always={"/gone": 410}) as rec,
        push_agent(push_retry_delays=(0.05,)) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        reply = await rpc(
            client,
            base,
            "SendMessage",
            {
                "message": add_message(),
                "configuration": {
                    "taskPushNotificationConfig": {"id": "g", "url": rec.url("/gone")}
                },
            },
        )
        task_id = reply["result"]["task"]["id"]
        await app.state.a2a.extras["push"].sender.idle()
        assert len(rec.attempts("/gone")) == 1
        got = await rpc(
            client, base, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "g"}
        )
        assert got["result"]["url"] == rec.url("/gone")
        assert await statuses(client, base, task_id) == {
            "g": ("failed", "receiver answered HTTP 410")
        }


async def test_unreachable_receiver_is_retried_then_failed() -> None:
    from .._support import free_port

    closed = f"http://127.0.0.1:{free_port()}/nobody"
    async with (
        push_agent(push_retry_delays=(0.05, 0.05)) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        reply = await rpc(
            client,
            base,
            "SendMessage",
            {
                "message": add_message(),
                "configuration": {"taskPushNotificationConfig": {"id": "n", "url": closed}},
            },
        )
        task_id = reply["result"]["task"]["id"]
        sender = app.state.a2a.extras["push"].sender
        await sender.idle()
        assert sender.retried == 2
        assert await statuses(client, base, task_id) == {
            "n": ("failed", "connection error: ConnectError (after 3 attempts)")
        }


async def test_config_added_while_running_gets_the_rest_in_order() -> None:
    slow = SlowAdd()
    async with (
        receiver() as rec,
        push_agent(demo_registry(slow)) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        message = add_message()
        message["metadata"] = {"skillId": "demo.slow_add"}
        reply = await rpc(
            client,
            base,
            "SendMessage",
            {
                "message": message,
                "configuration": {
                    "returnImmediately": True,
                    "taskPushNotificationConfig": {"id": "first", "url": rec.url("/a")},
                },
            },
        )
        task_id = reply["result"]["task"]["id"]
        created = await rpc(
            client,
            base,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": "second", "url": rec.url("/b")},
        )
        assert created["result"]["id"] == "second"
        slow.release()  # the task ends only now, after the second config is in place
        await rec.wait_for(
            lambda: any(
                _summary(d.event) == ("statusUpdate", "TASK_STATE_COMPLETED")
                for d in rec.accepted("/b")
            )
        )
        await app.state.a2a.extras["push"].sender.idle()
        seq_a = [d.body for d in rec.accepted("/a")]
        seq_b = [d.body for d in rec.accepted("/b")]
        assert _summary(json.loads(seq_a[0])) == ("task", "TASK_STATE_SUBMITTED")
        assert len(seq_b) < len(seq_a)
        # Same events, same order: the late config sees a tail of what the first one saw.
        assert seq_a[-len(seq_b) :] == seq_b


async def test_config_rides_in_the_send_request_on_0_3_and_rest() -> None:
    async with (
        receiver() as rec,
        push_agent() as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        old = await rpc(
            client,
            base,
            "message/send",
            {
                "message": {
                    "kind": "message",
                    "messageId": "m-old",
                    "role": "user",
                    "parts": [{"kind": "data", "data": {"a": 1, "b": 2}}],
                    "metadata": {"skillId": "demo.add"},
                },
                "configuration": {"pushNotificationConfig": {"url": rec.url("/old"), "token": "o"}},
            },
            version="0.3",
        )
        assert old["result"]["status"]["state"] == "completed"
        rest = await client.post(
            base + "/message:send",
            headers=V1,
            json={
                "message": add_message(),
                "configuration": {"taskPushNotificationConfig": {"url": rec.url("/rest")}},
            },
        )
        assert rest.status_code == 200
        await app.state.a2a.extras["push"].sender.idle()
        for path, task_id in (("/old", old["result"]["id"]), ("/rest", rest.json()["task"]["id"])):
            events = [d.event for d in rec.accepted(path)]
            if path == "/old":
                # Registered over 0.3: every delivery is the whole task as 0.3 JSON.
                assert {e["kind"] for e in events} == {"task"}
                assert {e["id"] for e in events} == {task_id}
                assert events[0]["status"]["state"] == "submitted"
                assert events[-1]["status"]["state"] == "completed"
                continue
            assert _summary(events[0]) == ("task", "TASK_STATE_SUBMITTED")
            assert _summary(events[-1]) == ("statusUpdate", "TASK_STATE_COMPLETED")
            assert events[0]["task"]["id"] == task_id
        assert {d.headers.get("x-a2a-notification-token") for d in rec.accepted("/old")} == {"o"}
        assert all("x-a2a-notification-token" not in d.headers for d in rec.accepted("/rest"))


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_a2a_client_reads_the_failed_status_and_reason(protocol: str) -> None:
    from apcore_a2a.client import A2AClient

    async with (
        receiver(always={"/dead": 503}) as rec,
        push_agent(push_retry_delays=(0.05,)) as (base, app),
        A2AClient(base, protocol=protocol) as client,  # type: ignore[arg-type]
    ):
        task = await client.send_message({"a": 1, "b": 2}, skill_id="demo.add")
        created = await client.set_push_config(task["id"], {"id": "d", "url": rec.url("/dead")})
        assert "status" not in created  # A2A's config has none
        assert await client.push_status(task["id"]) == {
            "taskId": task["id"],
            "configs": [
                {"id": "d", "url": rec.url("/dead"), "status": "active", "statusReason": None}
            ],
        }
        # The task is finished: a second one, held working until the config is there,
        # feeds the dead receiver.
        GATES[77] = asyncio.Event()
        second = await client.send_message({"n": 77}, skill_id="demo.gate", return_immediately=True)
        await client.set_push_config(second["id"], {"id": "d", "url": rec.url("/dead")})
        GATES[77].set()
        await rec.wait_for(lambda: len(rec.attempts("/dead")) >= 2)
        await app.state.a2a.extras["push"].sender.idle()
        report = await client.push_status(second["id"])
        assert report is not None
        (status,) = report["configs"]
        assert (status["status"], status["statusReason"]) == (
            "failed",
            "HTTP 503 (after 2 attempts)",
        )
        got = await client.get_push_config(second["id"], "d")
        assert "status" not in got and "statusReason" not in got
        (listed,) = await client.list_push_configs(second["id"])
        assert listed == got


async def test_a_receivers_cookie_is_never_sent_with_a_later_delivery() -> None:
    """Deliveries carry no state between them: a receiver's ``Set-Cookie`` is not kept and
    sent again, to it or to another caller's webhook on the same host."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from .._support import running_server

    seen: list[tuple[str, str | None]] = []

    async def hook(request: Request) -> Response:
        await request.body()
        seen.append((request.url.path, request.headers.get("cookie")))
        answer = Response(status_code=204)
        answer.set_cookie("sid", "alice-session", path="/")
        return answer

    app = Starlette(routes=[Route("/{name:path}", hook, methods=["POST"])])
    async with (
        running_server(app) as hooks,
        push_agent() as (base, agent),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        for path, token in (("/alice", "tok-a"), ("/bob", "tok-b"), ("/alice", "tok-a")):
            config = {"url": hooks + path, "token": token}
            params = {
                "message": add_message(),
                "configuration": {"taskPushNotificationConfig": config},
            }
            await rpc(client, base, "SendMessage", params)
            await agent.state.a2a.extras["push"].sender.idle()
    assert {path for path, _ in seen} == {"/alice", "/bob"}
    assert [cookie for _, cookie in seen if cookie is not None] == []
