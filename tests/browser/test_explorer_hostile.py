"""The Explorer shows a hostile agent's words as words: markup in the card (names,
descriptions, tags, examples, schema titles and enums) and in task output (text, data,
file names, media types, URLs, error messages) never becomes an element, and nothing runs.

Each payload carries the marker attribute ``data-pwn``: were any of it parsed as HTML, an
element with that attribute would appear, whatever the CSP then did with its handlers.
"""

from __future__ import annotations

import base64
import contextlib
from typing import Any, Literal

import pytest
from apcore import Executor, ModuleExample, Registry
from playwright.async_api import Error as PlaywrightError
from pydantic import BaseModel, Field
from starlette.applications import Starlette

from apcore_a2a import A2AServerFactory, File
from tests.browser.conftest import serve_app

pytestmark = pytest.mark.browser

MARK = "<img data-pwn src=x onerror=\"document.title='pwned'\">"
TAG = f"</code></pre><b data-pwn>bold</b><script>document.title='pwned'</script>{MARK}"
PAGE = b"<html><body><script>document.title='pwned'</script><b data-pwn>x</b></body></html>"
SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" onload="document.title=\'pwned\'">'
    b"<script>document.title='pwned'</script></svg>"
)


class HostileIn(BaseModel):
    note: str = Field(default="", title=f"Note {TAG}", description=f"what {TAG}")
    mode: Literal["plain", "<b data-pwn>odd</b>"] = Field(default="plain", title=TAG)


class HostileOut(BaseModel):
    model_config = {"extra": "allow"}


class HostileModule:
    input_schema = HostileIn
    output_schema = HostileOut
    description = f"Answers with markup {TAG}"
    tags = [f"tag{MARK}"]
    examples = [
        ModuleExample(title=f"example {TAG}", inputs={"note": TAG, "mode": "plain"}, output={})
    ]

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        if inputs.get("note") == "fail":
            raise ValueError(f"failed {TAG}")
        return {
            "text": TAG,
            TAG: [TAG, {TAG: TAG}],
            "page": File(raw=PAGE, media_type="text/html", filename=f"{TAG}.html"),
            "svg": File(raw=SVG, media_type="image/svg+xml", filename="x.svg"),
            "odd": File(raw=b"x", media_type=f'image/png" {MARK}', filename=MARK),
            "script_url": File(url="javascript:document.title='pwned'", filename=TAG),
            "data_url": File(url="data:text/html;base64," + base64.b64encode(PAGE).decode()),
            "web": File(url=f"https://example.invalid/{TAG}", filename=TAG),
        }


class ProtoIn(BaseModel):
    proto: str = Field(alias="__proto__")
    ctor: str = Field(alias="constructor")


class WideIn(BaseModel):
    blob: str = Field(max_length=2**31, description="up to 2 GiB")
    tag: str = Field(json_schema_extra={"maxLength": "ten", "title": 5})


class WideModule:
    """Schema keywords a browser cannot take as given: a maxLength past 2^31 - 1 and
    keywords of the wrong type."""

    input_schema = WideIn
    output_schema = HostileOut
    description = "Echo a string whose schema allows 2 GiB"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"echo": inputs["blob"] + inputs["tag"]}


class ProtoModule:
    """Fields named like Object.prototype's own members, echoed back."""

    input_schema = ProtoIn
    output_schema = HostileOut
    description = "Echo fields named __proto__ and constructor"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"echo": f"{inputs['__proto__']}|{inputs['constructor']}"}


def hostile_app(**settings: Any) -> Starlette:
    registry = Registry()
    registry.register("demo.hostile", HostileModule())
    registry.register("demo.proto", ProtoModule())
    registry.register("demo.wide", WideModule())
    settings.setdefault("name", f"Agent {TAG}")
    settings.setdefault("description", f"About {TAG}")
    settings.setdefault("explorer", True)
    app, _card = A2AServerFactory(Executor(registry), **settings).create()
    return app


async def assert_inert(page: Any) -> None:
    assert await page.locator("[data-pwn]").count() == 0
    assert await page.locator("script:not([src])").count() == 0
    assert await page.title() != "pwned"
    assert page.log.errors == []


async def test_hostile_card_and_task_output_stay_text(page: Any) -> None:
    async with serve_app(hostile_app) as base:
        await page.goto(base + "/explorer/")
        await page.wait_for_selector("#agent-name")
        assert TAG in await page.inner_text("#agent-name")
        await page.click("#skills [data-skill-id='demo.hostile']")
        await page.wait_for_selector("#skill-body code:text-is('demo.hostile')")
        assert "Answers with markup" in await page.inner_text("#skill-body")
        await page.click("button.example")
        await page.click("#send")
        await page.wait_for_selector("#task-state [data-state='TASK_STATE_COMPLETED']")
        artifact = page.locator("#task-body .artifact")
        await artifact.wait_for()
        assert TAG in await artifact.inner_text()
        await assert_inert(page)

        # Only http(s) URLs become links; the inline files are blob: downloads.
        hrefs = [
            await link.get_attribute("href") for link in await page.locator("a.file-link").all()
        ]
        assert hrefs and all(h.startswith(("blob:", "https://")) for h in hrefs), hrefs
        # A file the agent returned as HTML or SVG, opened in a tab of its own (middle
        # click, "open in new tab"), runs nothing either: a blob: URL has the page's
        # origin, and a top-level blob: document is not under the page's CSP.
        blobs = [h for h in hrefs if h.startswith("blob:")]
        blobs += [await img.get_attribute("src") for img in await page.locator("img.preview").all()]
        assert len(blobs) >= 3, blobs
        for blob in blobs:
            opened = await page.context.new_page()
            with contextlib.suppress(PlaywrightError):  # a download starts: nothing rendered
                await opened.goto(blob)
            assert await opened.title() != "pwned"
            await opened.close()

        # An error whose message carries markup is shown as text too.
        await page.fill("[data-path='note']", "fail")
        await page.click("#send")
        await page.wait_for_selector("#task-state [data-state='TASK_STATE_FAILED']")
        await assert_inert(page)


async def test_fields_named_proto_and_constructor_reach_the_module(page: Any) -> None:
    """Assigning ``out["__proto__"] = value`` sets a prototype (or, for a string, nothing):
    the form dropped that field and the agent refused the message as missing it."""
    async with serve_app(hostile_app) as base:
        await page.goto(base + "/explorer/#skill=demo.proto")
        await page.wait_for_selector("#skill-body code:text-is('demo.proto')")
        await page.fill("[data-path='__proto__']", "P")
        await page.fill("[data-path='constructor']", "C")
        await page.click("#send")
        await page.wait_for_selector("#task-state [data-state='TASK_STATE_COMPLETED']")
        assert '"P|C"' in await page.inner_text("#task-body .artifact")
        assert await page.evaluate("() => ({}).polluted") is None


async def test_a_malformed_skill_link_still_starts_the_page(page: Any) -> None:
    """``#skill=%E0%A4%A`` (a broken escape) made decodeURIComponent throw: the page said
    "The Explorer failed to start" and showed no skill form."""
    async with serve_app(hostile_app) as base:
        await page.goto(base + "/explorer/#skill=%E0%A4%A")
        await page.wait_for_selector("#skill-body .skill-title code")
        assert await page.locator("#banner").is_hidden()
        assert page.log.errors == []


async def test_out_of_range_schema_keywords_still_give_a_form(page: Any) -> None:
    """``input.maxLength = 2147483648`` throws (the DOM property is a 32-bit int): the
    skill's form never appeared and the page showed an uncaught error."""
    async with serve_app(hostile_app) as base:
        await page.goto(base + "/explorer/#skill=demo.wide")
        await page.wait_for_selector("#skill-body code:text-is('demo.wide')")
        await page.fill("[data-path='blob']", "ok")
        await page.fill("[data-path='tag']", "!")
        await page.click("#send")
        await page.wait_for_selector("#task-state [data-state='TASK_STATE_COMPLETED']")
        assert '"ok!"' in await page.inner_text("#task-body .artifact")
        assert page.log.errors == []
