"""`apcore-a2a serve --explorer` on the shipped examples, driven through the page."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests._support import EXAMPLES, TLS, cli_server

pytestmark = pytest.mark.browser

STATE = "#task-state [data-state='{}']"


async def test_cli_flag_serves_the_explorer_for_the_examples(page: Any) -> None:
    args = ["--extensions-dir", str(EXAMPLES / "extensions"), "--explorer"]
    with cli_server(args) as (base, _proc):
        async with httpx.AsyncClient(verify=TLS) as client:
            assert (await client.get(base + "/explorer/")).status_code == 200
        await page.goto(base + "/explorer/#skill=text.countdown")
        await page.wait_for_selector("#skill-body code:text-is('text.countdown')")
        await page.fill("[data-path='start']", "3")
        await page.fill("[data-path='delay']", "0.05")
        await page.click("#stream")
        await page.wait_for_selector(STATE.format("TASK_STATE_COMPLETED"))
        assert await page.locator("#timeline li[data-kind='artifactUpdate']").count() >= 2

        await page.click("#skills [data-skill-id='bank.transfer']")
        await page.fill("[data-path='to']", "ACME-42")
        await page.fill("[data-path='amount']", "1250")
        await page.click("#send")
        await page.locator("#task-body .approval").wait_for()
        await page.click("#approve")
        await page.wait_for_selector(STATE.format("TASK_STATE_COMPLETED"))
        assert page.log.errors == []
        assert page.log.console_errors() == []
