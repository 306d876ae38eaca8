"""An agent that answers with a lot (a 10 MB text, a stream of 2,000 chunks) leaves the
Explorer usable: each view renders a capped part of it and says how much it left out."""

from __future__ import annotations

from typing import Any

import pytest
from apcore import Executor, ModuleAnnotations, Registry
from pydantic import BaseModel
from starlette.applications import Starlette

from apcore_a2a import A2AServerFactory
from tests.browser.conftest import serve_app

pytestmark = pytest.mark.browser

COMPLETED = "#task-state [data-state='TASK_STATE_COMPLETED']"
CHUNKS = 2_000  # twenty times the 100 parts shown (10,000 froze the tab before; costs CI 50 s)
TEXT = 10_000_000
SHOWN_TEXT = 100_000  # LIMITS.text in render.js


class SizeIn(BaseModel):
    n: int


class AnyOut(BaseModel):
    model_config = {"extra": "allow"}


class HugeTextModule:
    input_schema = SizeIn
    output_schema = AnyOut
    description = "Answer one text of n characters"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"kind": "text", "text": "x" * inputs["n"]}


class ManyChunksModule:
    input_schema = SizeIn
    output_schema = AnyOut
    description = "Stream n text chunks"
    annotations = ModuleAnnotations(streaming=True)

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {}

    async def stream(self, inputs: dict[str, Any], context: Any) -> Any:
        for i in range(inputs["n"]):
            yield {"kind": "text", "text": f"chunk {i}"}


def big_app(**settings: Any) -> Starlette:
    registry = Registry()
    registry.register("big.text", HugeTextModule())
    registry.register("big.chunks", ManyChunksModule())
    app, _card = A2AServerFactory(Executor(registry), explorer=True, **settings).create()
    return app


async def run_skill(page: Any, base: str, skill: str, n: int, button: str) -> None:
    await page.goto(f"{base}/explorer/#skill={skill}")
    await page.wait_for_selector(f"#skill-body code:text-is('{skill}')")
    await page.fill("[data-path='n']", str(n))
    await page.click(button)
    # Rendering every chunk of the stream kept the tab busy for more than five minutes.
    await page.wait_for_selector(COMPLETED, timeout=120_000)


async def test_a_stream_of_two_thousand_chunks_renders_a_capped_view(page: Any) -> None:
    async with serve_app(big_app) as base:
        await run_skill(page, base, "big.chunks", CHUNKS, "#stream")
        artifact = page.locator("#task-body .artifact")
        assert await artifact.locator(".part").count() == 100
        omitted = await artifact.locator(".omitted").inner_text()
        assert omitted == f"… {CHUNKS - 100} more parts not shown"
        # The timeline keeps the latest events; its count says how many came.
        assert int(await page.inner_text("#event-count")) > CHUNKS
        assert await page.locator("#timeline > li").count() <= 200
        assert page.log.errors == []


async def test_a_ten_megabyte_text_renders_a_capped_view(page: Any) -> None:
    async with serve_app(big_app) as base:
        await run_skill(page, base, "big.text", TEXT, "#send")
        text = page.locator("#task-body .artifact .part-text")
        assert len(await text.locator("pre").inner_text()) < SHOWN_TEXT + 100
        assert f"… {TEXT - SHOWN_TEXT} more characters not shown" in await text.inner_text()
        assert page.log.errors == []
