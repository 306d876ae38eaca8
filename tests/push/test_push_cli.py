"""``apcore-a2a push set | get | list | delete`` against a live push agent (real sockets)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from .._support import TLS, cli
from .._support import json_lines as lines
from ._agent import GATES, push_agent, receiver, rpc, skill_message


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_push_commands_manage_configs_and_show_their_status(protocol: str) -> None:
    GATES[500] = asyncio.Event()
    async with (
        receiver(always={"/dead": 503}) as rec,
        push_agent(push_retry_delays=(0.05,), push_max_configs_per_task=2) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        reply = await rpc(
            client,
            base,
            "SendMessage",
            {
                "message": skill_message("demo.gate", 500),
                "configuration": {"returnImmediately": True},
            },
        )
        task_id = reply["result"]["task"]["id"]
        common = ("--protocol", protocol)
        code, out, err = await cli(
            "push", "set", base, task_id, rec.url("/ok"), "--id", "ok",
            "--notification-token", "t1", "--auth", "Bearer s3cret", *common,
        )  # fmt: skip
        assert code == 0, err
        assert lines(out) == [
            {
                "id": "ok",
                "taskId": task_id,
                "url": rec.url("/ok"),
                "token": "t1",
                "authentication": {"scheme": "Bearer", "credentials": "s3cret"},
                "status": "active",
                "statusReason": None,
            }
        ]
        code, out, err = await cli(
            "push", "set", base, task_id, rec.url("/dead"), "--id", "dead", *common
        )
        assert code == 0, err
        # Over the cap: the typed error, one line, exit 1.
        code, out, err = await cli(
            "push", "set", base, task_id, rec.url("/x"), "--id", "x", *common
        )
        assert (code, out) == (1, "")
        assert err.startswith("error: QuotaExceededError (-32091): This task already has 2 push")
        assert len(err.splitlines()) == 1

        GATES[500].set()
        await rec.wait_for(lambda: len(rec.attempts("/dead")) >= 2)
        await app.state.a2a.extras["push"].sender.idle()
        code, out, err = await cli("push", "get", base, task_id, "dead", *common)
        assert code == 0, err
        (dead,) = lines(out)
        assert (dead["status"], dead["statusReason"]) == ("failed", "HTTP 503 (after 2 attempts)")
        code, out, err = await cli("push", "list", base, task_id, *common)
        assert sorted((c["id"], c["status"]) for c in lines(out)) == [
            ("dead", "failed"),
            ("ok", "active"),
        ]
        code, out, err = await cli("push", "delete", base, task_id, "dead", *common)
        assert (code, out) == (0, "")
        code, out, err = await cli("push", "list", base, task_id, *common)
        assert [c["id"] for c in lines(out)] == ["ok"]
        # The receiver got the config's credentials with every delivery.
        assert {d.headers["authorization"] for d in rec.accepted("/ok")} == {"Bearer s3cret"}


async def test_push_command_input_errors_are_one_line() -> None:
    async with push_agent() as (base, _app):
        code, out, err = await cli("push", "set", base, "t", "http://h/", "--auth", "Bearer")
        assert (code, out) == (2, "")
        assert err == "error: --auth must look like 'SCHEME CREDENTIALS', e.g. 'Bearer abc'\n"
        code, out, err = await cli("push", "get", base, "no-such-task", "c")
        assert code == 1
        assert err.startswith("error: TaskNotFoundError (-32001)")
