"""Regenerate docs/explorer.png: ``python -m tests.browser.screenshot``.

Serves the shipped examples with ``--explorer``, streams ``text.countdown`` in Debian's
Chromium and captures the page.
"""

from __future__ import annotations

import asyncio

from playwright.async_api import async_playwright

from tests._support import EXAMPLES, ROOT, cli_server
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

OUT = ROOT / "docs" / "explorer.png"


async def main() -> None:
    args = ["--extensions-dir", str(EXAMPLES / "extensions"), "--explorer", "--name", "Examples"]
    with cli_server(args) as (base, _proc):
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            page = await browser.new_page(viewport={"width": 1440, "height": 960})
            await page.goto(base + "/explorer/#skill=text.countdown")
            await page.wait_for_selector("[data-path='start']")
            await page.fill("[data-path='start']", "4")
            await page.fill("[data-path='delay']", "0.1")
            await page.click("#stream")
            await page.wait_for_selector("#task-state [data-state='TASK_STATE_COMPLETED']")
            await page.screenshot(path=str(OUT))
            await browser.close()
    print(OUT)


if __name__ == "__main__":
    asyncio.run(main())
