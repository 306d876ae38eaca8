"""Hostile webhooks cannot hurt the agent (issue 17): huge answers, drips, floods.

The receivers are raw asyncio servers (tests/push/_hostile.py) so that nothing between
them and the agent smooths their behaviour.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from .._support import TLS, cli_server
from ._agent import add_message, push_agent, rpc, skill_message, statuses
from ._hostile import hostile


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


def _finished(rec: Any) -> int:
    """Connections done that delivered a task's last event (its completed status)."""
    return sum(b"TASK_STATE_COMPLETED" in c.request for c in rec.closed())


def _send(url: str) -> dict[str, Any]:
    return {
        "message": {
            "messageId": os.urandom(8).hex(),
            "role": "ROLE_USER",
            "parts": [{"data": {"a": 1, "b": 2}, "mediaType": "application/json"}],
            "metadata": {"skillId": "math.add"},
        },
        "configuration": {"taskPushNotificationConfig": {"url": url}},
    }


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
async def test_a_receiver_answering_1_gib_leaves_agent_memory_flat() -> None:
    env = {"A2A_PUSH_TIMEOUT": "10", "A2A_PUSH_RETRY_DELAYS": "0.05"}
    args = ["--extensions-dir", "examples/extensions", "--push-notifications"]
    args.append("--push-allow-insecure-urls")
    with cli_server(args, env=env) as (base, proc):
        async with (
            hostile("ok") as polite,
            hostile("huge", size=1 << 30) as huge,
            httpx.AsyncClient(timeout=30, verify=TLS) as client,
        ):
            # Warm up every code path of a delivery first, so the baseline includes them.
            for _ in range(3):
                await rpc(client, base, "SendMessage", _send(polite.url))
            # Per config, events arrive in order: the completed status is each one's last.
            await polite.wait_for(lambda: _finished(polite) == 3)
            per_task = len(polite.conns) // 3
            before = _rss_bytes(proc.pid)

            tasks = 10
            for _ in range(tasks):
                reply = await rpc(client, base, "SendMessage", _send(huge.url))
                assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            # Every event of every task, each answered with 1 GiB.
            await huge.wait_for(lambda: _finished(huge) == tasks)
            growth = _rss_bytes(proc.pid) - before
            sent = [c.sent for c in huge.closed()]
            print(f"RSS growth {growth / 1e6:.1f} MB; receiver got to send {max(sent)} bytes max")
            assert growth < 20 * 1024 * 1024, f"agent RSS grew by {growth / 1e6:.1f} MB"
            # The agent hung up long before the gigabyte: nothing read it to the end.
            assert max(sent) < (1 << 30) // 4
            # The deliveries still count as accepted (2xx): no retry was made.
            assert len(huge.conns) == per_task * tasks


async def test_a_header_drip_ends_each_attempt_at_push_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # One byte every 0.2 s never trips a per-read timeout; only a deadline per attempt
    # stops it. The receiver would drip for 2000 s.
    caplog.set_level(logging.INFO, logger="apcore_a2a.push")
    async with (
        hostile("drip-headers", interval=0.2) as drip,
        push_agent(push_timeout=1.0, push_retry_delays=(0.1,)) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        reply = await rpc(client, base, "SendMessage", _config(drip.url, "d"))
        task_id = reply["result"]["task"]["id"]
        await app.state.a2a.extras["push"].sender.idle()
        # One try and its one retry, then the config failed (the receiver sees each
        # hang-up at its next drip).
        await drip.wait_for(lambda: len(drip.closed()) == 2)
        attempts = drip.closed()
        assert len(drip.conns) == 2
        # Each attempt ended after ~5 dripped bytes (1 s), far from the 10 000 it had left.
        assert all(c.sent <= 15 for c in attempts), [c.sent for c in attempts]
        print("drip attempt durations:", [round(c.duration, 3) for c in attempts])
        assert await statuses(client, base, task_id) == {
            "d": ("failed", "no complete answer within 1 s (after 2 attempts)")
        }
        # A receiver's failure, which any caller can cause, is a warning (was ERROR).
        gave_up = [r for r in caplog.records if "giving up" in r.getMessage()]
        assert [r.levelno for r in gave_up] == [logging.WARNING]
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_body_drip_after_a_2xx_is_cut_at_push_timeout_and_counts_as_delivered() -> None:
    async with (
        hostile("drip-body", interval=0.2) as drip,
        push_agent(push_timeout=1.0, push_retry_delays=(0.1,)) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        reply = await rpc(client, base, "SendMessage", _config(drip.url, "b"))
        task_id = reply["result"]["task"]["id"]
        sender = app.state.a2a.extras["push"].sender
        await sender.idle()
        await drip.wait_for(lambda: len(drip.closed()) == len(drip.conns) == sender.sent)
        attempts = drip.closed()
        # Every event was delivered once (the status arrived in time), none retried.
        assert sender.sent == len(attempts) >= 3
        assert sender.retried == 0
        assert all(c.sent <= 15 for c in attempts), [c.sent for c in attempts]
        assert await statuses(client, base, task_id) == {"b": ("active", None)}


def _config(url: str, config_id: str, skill: str = "demo.add") -> dict[str, Any]:
    message = add_message()
    message["metadata"] = {"skillId": skill}
    return {
        "message": message,
        "configuration": {"taskPushNotificationConfig": {"id": config_id, "url": url}},
    }


async def test_a_stalled_receiver_overflows_its_bounded_queue_and_is_marked_failed() -> None:
    async with (
        hostile("stall") as stall,
        push_agent(
            push_timeout=30.0, push_retry_delays=(), push_queue_size=5, shutdown_timeout=1.0
        ) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        sender = app.state.a2a.extras["push"].sender
        reply = await rpc(
            client,
            base,
            "SendMessage",
            {
                "message": skill_message("demo.chunks", 40),
                "configuration": {"taskPushNotificationConfig": {"id": "s", "url": stall.url}},
            },
        )
        task_id = reply["result"]["task"]["id"]
        assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        # ~43 events: one in flight (stalled), five queued, the sixth overflowed the queue.
        await stall.wait_for(lambda: len(stall.conns) == 1)
        got = await statuses(client, base, task_id)
        assert got == {
            "s": (
                "failed",
                "more than 5 events were waiting for this receiver; deliveries stopped",
            )
        }
        assert sender.dropped >= 40 - 5
        assert sender.pending <= 1  # nothing queued any more, only the stalled attempt
        stall.release()
        await sender.idle()
        # The stalled attempt then failed too; the first reason (the overflow) is kept.
        assert await statuses(client, base, task_id) == got
        assert len(stall.conns) == 1


#: Two callers of the same agent, by API key.
KEYS = ("key-alice-0123456789=alice", "key-bob-0123456789ab=bob")
ALICE, BOB = ({"X-API-Key": key.split("=")[0]} for key in KEYS)


async def test_stalled_receivers_of_many_tasks_hold_at_most_push_max_deliveries() -> None:
    # Every task may have its webhooks; without a cap each (task, config) would hold its
    # own connection to a stalled receiver, and callers' tasks could take every file
    # descriptor of the agent.
    async with (
        hostile("stall") as stall,
        push_agent(
            api_keys=KEYS,
            push_timeout=30.0,
            push_retry_delays=(),
            push_max_deliveries=2,
            shutdown_timeout=1.0,
        ) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        sender = app.state.a2a.extras["push"].sender
        for caller in (ALICE, BOB) * 3:
            client.headers.update(caller)
            await rpc(client, base, "SendMessage", _config(stall.url, "s"))
        await stall.wait_for(lambda: len(stall.conns) >= 2)
        await asyncio.sleep(0.5)  # room for a connection beyond the cap to show up
        assert len(stall.conns) == 2
        assert sender.pending >= 6  # the other tasks' deliveries wait their turn
        stall.release()  # the stalled receiver now hangs up at once: each config fails
        await sender.idle()
        assert stall.peak == 2
        assert len(stall.conns) == 6  # every config got its turn


async def test_stalled_receivers_hold_at_most_push_queue_bytes_and_others_keep_delivering() -> None:
    # push_queue_size counts events per config, not bytes, and any number of tasks may
    # have configs (a 0.3 body is the whole task): only a budget across them all bounds
    # what stalled receivers make the agent hold. A 1.0 event of demo.chunks is ~240 bytes.
    budget = 10_000
    async with (
        hostile("stall") as stall,
        hostile("ok") as polite,
        push_agent(
            push_timeout=30.0, push_retry_delays=(), push_queue_bytes=budget, shutdown_timeout=1.0
        ) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        sender = app.state.a2a.extras["push"].sender
        peak = 0

        async def watch() -> None:  # the agent runs in this loop: sees every step
            nonlocal peak
            while True:
                peak = max(peak, sender.held_bytes)
                await asyncio.sleep(0)

        async def send(n: int, url: str) -> str:
            hook = {"taskPushNotificationConfig": {"id": "s", "url": url}}
            message = skill_message("demo.chunks", n)
            reply = await rpc(
                client, base, "SendMessage", {"message": message, "configuration": hook}
            )
            return str(reply["result"]["task"]["id"])

        async def status(task_id: str) -> tuple[str, str | None]:
            return (await statuses(client, base, task_id))["s"]

        watcher = asyncio.create_task(watch())
        try:
            # 33 events for a receiver that never answers: ~8 KB held, within the budget.
            slow = await send(30, stall.url)
            assert await status(slow) == ("active", None)
            assert budget * 0.7 < sender.held_bytes <= budget
            # A receiver that keeps up gets all its 23 events: its queue would go over the
            # budget, and the stalled receiver holding the most is stopped instead.
            fast = await send(20, polite.url)
            await polite.wait_for(lambda: _finished(polite) == 1)
            assert sum(b'"artifactUpdate"' in c.request for c in polite.conns) == 20
            assert await status(fast) == ("active", None)
            assert await status(slow) == (
                "failed",
                f"the events waiting for push receivers reached {budget} bytes "
                "(push_queue_bytes), the most of them for this receiver; deliveries stopped",
            )
            # 83 events for a stalled receiver alone: it goes over the budget itself.
            alone = await send(80, stall.url)
            assert await status(alone) == (
                "failed",
                f"the events waiting for push receivers would exceed {budget} bytes "
                "(push_queue_bytes); deliveries to this receiver stopped",
            )
            # Their queues were given back: only the two stalled attempts (each a task's
            # first event, the whole task, ~500 bytes) are held.
            assert sender.pending == 2
            assert sender.held_bytes < 1500
            again = await send(20, polite.url)
            await polite.wait_for(lambda: _finished(polite) == 2)
            assert await status(again) == ("active", None)
            stall.release()
            await sender.idle()
            assert sender.held_bytes == 0
        finally:
            watcher.cancel()
        assert 0 < peak <= budget, peak


async def test_one_callers_stalled_receivers_hold_at_most_half_of_push_max_deliveries() -> None:
    # The slots are shared by every caller. Before, bob's stalled receivers held all of
    # them, so alice's receiver, which keeps up, got nothing until all of his attempts
    # ended (push_timeout each): her queue filled meanwhile, and once over push_queue_size
    # her config was marked failed.
    async with (
        hostile("stall") as stall,
        hostile("ok") as polite,
        push_agent(
            api_keys=KEYS,
            push_timeout=30.0,
            push_retry_delays=(),
            push_max_deliveries=2,
            shutdown_timeout=1.0,
        ) as (base, app),
        httpx.AsyncClient(timeout=10, headers=ALICE, verify=TLS) as alice,
        httpx.AsyncClient(timeout=10, headers=BOB, verify=TLS) as bob,
    ):
        sender = app.state.a2a.extras["push"].sender
        for _ in range(3):
            await rpc(bob, base, "SendMessage", _config(stall.url, "s"))
        await stall.wait_for(lambda: len(stall.conns) >= 1)
        hook = {"taskPushNotificationConfig": {"id": "p", "url": polite.url}}
        chunks = {"message": skill_message("demo.chunks", 10), "configuration": hook}
        reply = await rpc(alice, base, "SendMessage", chunks)
        task_id = reply["result"]["task"]["id"]
        assert await statuses(alice, base, task_id) == {"p": ("active", None)}
        await polite.wait_for(lambda: _finished(polite) == 1, timeout=20)  # bob still stalls
        assert await statuses(alice, base, task_id) == {"p": ("active", None)}
        assert len(stall.conns) == 1  # bob's other deliveries wait for his own slot
        stall.release()
        await sender.idle()
        assert stall.peak == 1
        assert len(stall.conns) == 3


async def test_one_callers_many_small_queues_never_stop_anothers_receiver() -> None:
    # Over push_queue_bytes the receiver holding the most queued bytes was stopped. Bob's
    # stalled receivers, each holding less than alice's, together held the most of the
    # budget, and his next task made alice's config fail. Now the caller holding the most
    # gives up his own heaviest receiver.
    budget = 10_000
    async with (
        hostile("stall") as stall,
        push_agent(
            api_keys=KEYS,
            push_timeout=30.0,
            push_retry_delays=(),
            push_queue_bytes=budget,
            shutdown_timeout=1.0,
        ) as (base, app),
        httpx.AsyncClient(timeout=10, headers=ALICE, verify=TLS) as alice,
        httpx.AsyncClient(timeout=10, headers=BOB, verify=TLS) as bob,
    ):
        sender = app.state.a2a.extras["push"].sender

        async def send(client: httpx.AsyncClient, n: int) -> str:
            hook = {"taskPushNotificationConfig": {"id": "s", "url": stall.url}}
            chunks = {"message": skill_message("demo.chunks", n), "configuration": hook}
            return str((await rpc(client, base, "SendMessage", chunks))["result"]["task"]["id"])

        hers = await send(alice, 10)  # ~3 KB held for her receiver, which stalls a while
        assert await statuses(alice, base, hers) == {"s": ("active", None)}
        his = [await send(bob, 2) for _ in range(8)]  # ~1.2 KB each, ~10 KB together
        assert await statuses(alice, base, hers) == {"s": ("active", None)}
        reasons = [(await statuses(bob, base, task_id))["s"] for task_id in his]
        assert ("failed", None) not in reasons
        assert sum(state == "failed" for state, _ in reasons) >= 2
        assert sender.held_bytes <= budget
        stall.release()
        await sender.idle()
