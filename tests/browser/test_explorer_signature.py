"""The Explorer says whether the card it shows is signed, and whether the signature verifies.

The check runs in Chromium (WebCrypto) on the card the page received; the signature was
made by the a2a-sdk's signer in the agent, so a pass also shows that the page rebuilds the
SDK's canonical form. Tampering is done on the wire, by intercepting the card request.
"""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest

from tests.browser._agent import demo_app
from tests.browser.conftest import serve_app

pytestmark = pytest.mark.browser

SECRET = "explorer-signature-secret-0123456789abcdef"
SIGNATURE = "#card-signature[data-state='{}']"


async def open_card(page: Any, base: str) -> None:
    await page.goto(base + "/explorer/")
    await page.wait_for_selector("#agent-name")


async def test_a_signed_card_shows_as_verified(page: Any) -> None:
    async with serve_app(demo_app, card_signing=True) as base:
        await open_card(page, base)
        await page.wait_for_selector(SIGNATURE.format("verified"))
        badge = page.locator("#card-signature .badge")
        assert "signed" in await badge.inner_text()
        assert "ES256" in (await badge.get_attribute("title") or "")
        assert page.log.console_errors() == [] and page.log.errors == []


@pytest.mark.parametrize(
    "change",
    ["skill description", "schema bound", "interface url"],
)
async def test_a_changed_card_shows_as_not_verifying(page: Any, change: str) -> None:
    async with serve_app(demo_app, card_signing=True) as base:

        async def tamper(route: Any) -> None:
            response = await route.fetch()
            card = json.loads(await response.body())
            if change == "skill description":
                card["skills"][0]["description"] += "!"
            elif change == "schema bound":
                ext = card["capabilities"]["extensions"][0]["params"]["skills"]
                schema = next(iter(ext.values()))["inputSchema"]
                schema["additionalProperties"] = not schema.get("additionalProperties", True)
            else:
                card["supportedInterfaces"][0]["url"] += "x"
            await route.fulfill(response=response, body=json.dumps(card))

        await page.route("**/.well-known/agent-card.json", tamper)
        await open_card(page, base)
        await page.wait_for_selector(SIGNATURE.format("invalid"))
        title = await page.locator("#card-signature .badge").get_attribute("title")
        assert "changed after signing" in (title or "")


async def test_an_unsigned_card_says_so(page: Any) -> None:
    async with serve_app(demo_app) as base:
        await open_card(page, base)
        assert await page.inner_text("#card-signature") == "unsigned"


async def test_the_extended_card_is_checked_too(page: Any) -> None:
    token = jwt.encode({"sub": "ann", "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")
    async with serve_app(demo_app, card_signing=True, auth_key=SECRET) as base:
        await open_card(page, base)
        await page.wait_for_selector(SIGNATURE.format("verified"))
        await page.fill("#token", token)
        await page.press("#token", "Tab")
        await page.wait_for_selector("#token-status:text('extended card loaded')")
        assert "extended card" in await page.inner_text("#card-body")
        await page.wait_for_selector(SIGNATURE.format("verified"))
