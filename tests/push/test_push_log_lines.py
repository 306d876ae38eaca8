"""A caller's push config values (URL, config id) reach the agent's log only as one bounded
line: a line break in them cannot forge a log record, under any formatter."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from tests._support import TLS

from ._agent import add_message, push_agent, receiver, rpc

FORGED = "\nERROR apcore_a2a.auth forged record"


def _config(url: str, config_id: str, **extra: Any) -> dict[str, Any]:
    config = {"url": url, "id": config_id, **extra}
    return {"message": add_message(), "configuration": {"taskPushNotificationConfig": config}}


def _push_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "apcore_a2a.push"]


async def test_a_refused_webhook_url_is_logged_on_one_bounded_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="apcore_a2a.push")
    url = "https://hooks.example.com/a" + FORGED + "x" * 60_000
    async with push_agent() as (base, _app), httpx.AsyncClient(timeout=30, verify=TLS) as client:
        reply = await rpc(client, base, "SendMessage", _config(url, "c1"))
    assert reply["error"]["code"] == -32602, reply
    assert "control character" in reply["error"]["message"]
    lines = [m for m in _push_lines(caplog) if "refused push notification URL" in m]
    assert len(lines) == 1, _push_lines(caplog)
    assert "\n" not in lines[0]
    assert "forged record" in lines[0]  # escaped, not dropped
    assert len(lines[0]) < 2_000


async def test_a_failing_configs_id_is_logged_on_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="apcore_a2a.push")
    async with (
        receiver(always={"/gone": 410}) as rec,
        push_agent(push_retry_delays=()) as (base, app),
        httpx.AsyncClient(timeout=30, verify=TLS) as client,
    ):
        # A scheme without credentials is accepted (and warned about).
        auth = {"authentication": {"scheme": "Bearer"}}
        reply = await rpc(client, base, "SendMessage", _config(rec.url("/gone"), FORGED, **auth))
        assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", reply
        await app.state.a2a.extras["push"].sender.idle()
        assert rec.attempts("/gone")
    lines = [m for m in _push_lines(caplog) if "forged record" in m]
    assert any("giving up" in m for m in lines), lines
    assert any("without credentials" in m for m in lines), lines
    assert not [m for m in lines if "\n" in m], lines
