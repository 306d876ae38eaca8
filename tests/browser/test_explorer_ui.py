"""The Explorer in a real Chromium against a real agent served by our factory."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
import pytest
from starlette.applications import Starlette

from apcore_a2a.explorer import explorer_routes
from tests._support import TLS, running_server
from tests.browser._agent import Gate, demo_app, tiny_png
from tests.browser.conftest import serve_app

pytestmark = pytest.mark.browser

STATE = "#task-state [data-state='{}']"


async def open_explorer(page: Any, base: str, skill: str | None = None) -> None:
    await page.goto(base + "/explorer/")
    await page.wait_for_selector("#agent-name")
    if skill:
        await page.click(f"#skills [data-skill-id='{skill}']")
        await page.wait_for_selector(f"#skill-body code:text-is('{skill}')")


async def wait_count(locator: Any, at_least: int, timeout: float = 10.0) -> int:
    # wait_for_function would need eval, which the page's CSP forbids.
    deadline = asyncio.get_running_loop().time() + timeout
    while (count := await locator.count()) < at_least:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"expected {at_least} matches, still {count}")
        await asyncio.sleep(0.05)
    return count


async def task_via_rpc(base: str, task_id: str, headers: dict[str, str] | None = None) -> Any:
    async with httpx.AsyncClient(verify=TLS) as client:
        resp = await client.post(
            base + "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}},
            headers={"A2A-Version": "1.0", **(headers or {})},
        )
    return resp.json()["result"]


async def test_page_loads_without_errors_or_foreign_requests(page: Any) -> None:
    async with serve_app(demo_app) as base:
        await open_explorer(page, base)
        await page.wait_for_selector("#skills [data-skill-id='demo.add'].selected")
        await page.wait_for_load_state("networkidle")

        assert await page.inner_text("#agent-name") == "Explorer demo"
        assert await page.inner_text("#skill-count") == "7"
        card = await page.inner_text("#card-body")
        assert "v1.2.3" in card
        assert "JSONRPC" in card and "HTTP+JSON" in card
        assert "urn:apcore:a2a:skill-schemas:v1" in card
        wipe = await page.inner_text("#skills [data-skill-id='demo.wipe']")
        assert "destructive" in wipe and "requires approval" in wipe
        assert "read-only" in await page.inner_text("#skills [data-skill-id='demo.add']")
        assert "streaming" in await page.inner_text("#skills [data-skill-id='demo.ticks']")

        origin = urlsplit(base).netloc
        foreign = [u for u in page.log.requests if urlsplit(u).netloc not in (origin, "")]
        assert foreign == []
        assert page.log.console_errors() == []
        assert page.log.errors == []
        fetched = {urlsplit(u).path for u in page.log.requests}
        assert {"/explorer/", "/explorer/js/app.js", "/.well-known/agent-card.json"} <= fetched


async def test_fill_generated_form_and_send_shows_completed_artifact(page: Any) -> None:
    async with serve_app(demo_app) as base:
        await open_explorer(page, base, "demo.add")
        await page.fill("[data-path='a']", "40")
        await page.fill("[data-path='b']", "2")
        await page.click("#send")
        await page.wait_for_selector(STATE.format("TASK_STATE_COMPLETED"))
        artifact = page.locator("#task-body .artifact")
        await artifact.wait_for()
        assert "sum" in await artifact.inner_text()
        assert "42" in await artifact.inner_text()
        # The context panel lists the task that was just run.
        task_id = await page.get_attribute("#task-body .task", "data-task-id")
        await page.wait_for_selector(f"#context-tasks [data-task-id='{task_id}']")
        assert page.log.errors == []


async def test_example_button_fills_the_form(page: Any) -> None:
    async with serve_app(demo_app) as base:
        await open_explorer(page, base, "demo.add")
        await page.click("button.example:text('two plus three')")
        assert await page.input_value("[data-path='a']") == "2"
        assert await page.input_value("[data-path='b']") == "3"
        await page.click("#send")
        await page.wait_for_selector(STATE.format("TASK_STATE_COMPLETED"))
        assert "5" in await page.inner_text("#task-body .artifact")


async def test_every_field_type_reaches_the_module_as_typed(page: Any) -> None:
    async with serve_app(demo_app) as base:
        await open_explorer(page, base, "demo.kitchen")
        await page.fill("[data-path='title']", "hello world")
        await page.fill("[data-path='ratio']", "0.25")
        await page.fill("[data-path='count']", "7")
        await page.check("[data-path='flag']")
        await page.select_option("[data-path='color']", label="green")
        await page.fill("[data-path='address.city']", "Lyon")
        await page.click("[data-add-item='tags']")
        await page.click("[data-add-item='tags']")
        await page.fill("[data-path='tags.0']", "x")
        await page.fill("[data-path='tags.1']", "y")
        await page.set_input_files(
            "[data-path='blob']",
            files=[{"name": "note.txt", "mimeType": "text/plain", "buffer": b"0123456789"}],
        )
        await page.wait_for_selector("#skill-body .field-file :text('note.txt, 10 bytes')")
        await page.click("#send")
        await page.wait_for_selector(STATE.format("TASK_STATE_COMPLETED"))
        task_id = await page.get_attribute("#task-body .task", "data-task-id")
        task = await task_via_rpc(base, task_id)
        sent = task["history"][0]["parts"]
        assert sent[1]["filename"] == "note.txt"
        assert sent[1]["metadata"] == {"field": "blob"}
        output = task["artifacts"][0]["parts"][0]["data"]
        assert output == {
            "title": "hello world",
            "ratio": 0.25,
            "count": 7,
            "flag": True,
            "color": "green",
            "address": {"city": "Lyon"},
            "tags": ["x", "y"],
            "blob_text": "0123456789",
        }


async def test_raw_json_toggle_round_trips_and_rejects_bad_json(page: Any) -> None:
    async with serve_app(demo_app) as base:
        await open_explorer(page, base, "demo.add")
        await page.fill("[data-path='a']", "1")
        await page.check(".raw-toggle")
        raw = page.locator(".raw-json")
        assert json.loads(await raw.input_value()) == {"a": 1}
        await raw.fill('{"a": 5, "b": 6}')
        await page.uncheck(".raw-toggle")
        assert await page.input_value("[data-path='b']") == "6"

        await page.check(".raw-toggle")
        await raw.fill('{"a": 5,')
        await page.click("#send")
        error = page.locator("#send-error .error-box")
        await error.wait_for()
        assert "Raw JSON is not valid" in await error.inner_text()
        # Switching back with broken JSON keeps the raw editor and says why.
        await page.click(".raw-toggle")
        assert await page.is_checked(".raw-toggle")
        assert "Cannot switch back" in await page.inner_text(".schema-form")


async def test_schema_errors_are_shown_with_code_and_field(page: Any) -> None:
    async with serve_app(demo_app) as base:
        await open_explorer(page, base, "demo.add")
        await page.fill("[data-path='a']", "1")
        await page.fill("[data-path='b']", "1")
        await page.click("#send")
        await page.wait_for_selector(STATE.format("TASK_STATE_COMPLETED"))
        assert await page.inner_text("#event-count") == "1"
        await page.fill("[data-path='b']", "")
        await page.click("#send")
        box = page.locator("#task-body .error-box")
        await box.wait_for()
        text = await box.inner_text()
        assert "-32602" in text
        assert "/b" in await box.locator(".field-errors").inner_text()
        assert "Field required" in text
        # The failed request produced no events, and the earlier task is no longer shown.
        assert await page.inner_text("#event-count") == ""
        assert await page.locator("#timeline li[data-kind]").count() == 0
        assert await page.locator("#task-body .task").count() == 0


async def test_stream_shows_events_live(page: Any) -> None:
    gate = Gate()
    async with serve_app(lambda **kw: demo_app(gate, **kw)) as base:
        await open_explorer(page, base, "demo.ticks")
        await page.fill("[data-path='n']", "2")
        await page.click("#stream")
        await asyncio.wait_for(gate.reached.wait(), timeout=10)
        # The module is parked before its last chunk: whatever the timeline shows now
        # arrived while the task was still running.
        events = page.locator("#timeline li[data-kind]")
        await wait_count(page.locator("#timeline li[data-kind='artifactUpdate']"), 2)
        assert await events.count() >= 3
        assert not await page.locator(STATE.format("TASK_STATE_COMPLETED")).count()
        gate.release.set()
        await page.wait_for_selector(STATE.format("TASK_STATE_COMPLETED"))
        assert await events.count() > 3
        assert "stream closed" in await page.inner_text("#timeline")


async def test_cancel_a_slow_task(page: Any) -> None:
    gate = Gate()
    async with serve_app(lambda **kw: demo_app(gate, **kw)) as base:
        await open_explorer(page, base, "demo.slow")
        await page.click("#stream")
        await asyncio.wait_for(gate.reached.wait(), timeout=10)
        await page.wait_for_selector(STATE.format("TASK_STATE_WORKING"))
        await page.click("#task-cancel")
        await page.wait_for_selector(STATE.format("TASK_STATE_CANCELED"), timeout=5000)
        await asyncio.wait_for(gate.cancelled.wait(), timeout=30)
        assert await page.is_disabled("#task-cancel")


async def test_cancel_after_return_immediately(page: Any) -> None:
    gate = Gate()
    async with serve_app(lambda **kw: demo_app(gate, **kw)) as base:
        await open_explorer(page, base, "demo.slow")
        await page.check("#return-immediately")
        await page.click("#send")
        await asyncio.wait_for(gate.reached.wait(), timeout=10)
        await page.wait_for_selector("#task-cancel:enabled")
        await page.click("#task-cancel")
        await page.wait_for_selector(STATE.format("TASK_STATE_CANCELED"), timeout=5000)


async def test_resubscribe_to_a_running_task(page: Any) -> None:
    gate = Gate()
    async with serve_app(lambda **kw: demo_app(gate, **kw)) as base:
        await open_explorer(page, base, "demo.slow")
        await page.check("#return-immediately")
        await page.click("#send")
        await asyncio.wait_for(gate.reached.wait(), timeout=10)
        await page.wait_for_selector("#task-resubscribe:enabled")
        await page.click("#task-resubscribe")
        await page.wait_for_selector("#timeline .event-note:text('SubscribeToTask')")
        await page.wait_for_selector("#timeline li[data-kind='task']")
        await page.click("#task-cancel")
        await page.wait_for_selector(STATE.format("TASK_STATE_CANCELED"), timeout=5000)


async def test_approve_a_module_that_requires_approval(page: Any) -> None:
    async with serve_app(demo_app) as base:
        await open_explorer(page, base, "demo.wipe")
        await page.fill("[data-path='target']", "cache")
        await page.click("#send")
        approval = page.locator("#task-body .approval")
        await approval.wait_for()
        assert "demo.wipe" in await approval.inner_text()
        assert await page.locator(STATE.format("TASK_STATE_INPUT_REQUIRED")).count() == 1
        await page.click("#approve")
        await page.wait_for_selector(STATE.format("TASK_STATE_COMPLETED"))
        assert "cache" in await page.inner_text("#task-body .artifact")
        history = await page.inner_text("#task-body .state-history")
        assert "input-required" in history and "completed" in history


async def test_reject_a_module_that_requires_approval(page: Any) -> None:
    async with serve_app(demo_app) as base:
        await open_explorer(page, base, "demo.wipe")
        await page.fill("[data-path='target']", "db")
        await page.click("#send")
        await page.locator("#task-body .approval").wait_for()
        await page.fill("#reject-reason", "not today")
        await page.click("#reject")
        await page.wait_for_selector(STATE.format("TASK_STATE_REJECTED"))
        assert not await page.locator("#task-body .artifact").count()


JWT_SECRET = "explorer-test-secret-0123456789abcdef"
# exp is required (issue 17); an hour outlives any run of this module.
_CLAIMS = {"sub": "ann", "exp": int(time.time()) + 86_400}  # made at import: a day
GOOD_JWT = jwt.encode(_CLAIMS, JWT_SECRET, algorithm="HS256")
BAD_JWT = jwt.encode(_CLAIMS, "another-secret-0123456789abcdef-xyz", algorithm="HS256")


@pytest.mark.parametrize(
    ("settings", "wrong", "good"),
    [
        pytest.param({"api_keys": ("good-key",)}, "wrong-key", "good-key", id="api-key"),
        pytest.param({"auth_key": JWT_SECRET}, BAD_JWT, GOOD_JWT, id="bearer-jwt"),
        pytest.param(
            {"auth_key": JWT_SECRET, "api_keys": ("good-key",)}, "wrong", "good-key", id="both-key"
        ),
        pytest.param(
            {"auth_key": JWT_SECRET, "api_keys": ("good-key",)}, BAD_JWT, GOOD_JWT, id="both-jwt"
        ),
    ],
)
async def test_wrong_token_gives_a_readable_401_and_the_right_one_works(
    page: Any, settings: dict[str, Any], wrong: str, good: str
) -> None:
    async with serve_app(demo_app, **settings) as base:
        await open_explorer(page, base, "demo.add")
        assert "required" in await page.inner_text("#token-label")
        assert "secured" in await page.inner_text("#card-body")
        await page.fill("[data-path='a']", "1")
        await page.fill("[data-path='b']", "1")
        await page.fill("#token", wrong)
        await page.press("#token", "Tab")
        await page.wait_for_selector("#token-status:text('token rejected (401)')")
        await page.click("#send")
        box = page.locator("#task-body .error-box")
        await box.wait_for()
        text = await box.inner_text()
        assert "HTTP 401 Unauthorized" in text
        assert "Check the token" in text
        await page.fill("#token", good)
        await page.press("#token", "Tab")
        # With the token accepted, the page switches to the caller's extended card.
        await page.wait_for_selector("#token-status:text('extended card loaded')")
        assert "extended card" in await page.inner_text("#card-body")
        await page.click("#send")
        await page.wait_for_selector(STATE.format("TASK_STATE_COMPLETED"))
        # The token travels in a header only: never in a URL, never in web storage.
        assert all(good not in url for url in [page.url, *page.log.requests])
        assert await page.evaluate("() => localStorage.length + sessionStorage.length") == 0


async def test_message_reply_is_rendered(page: Any) -> None:
    async with serve_app(demo_app) as base:
        await open_explorer(page, base, "demo.greet")
        await page.fill("[data-path='name']", "Ada")
        await page.click("#send")
        reply = page.locator("#task-body .message-reply")
        await reply.wait_for()
        assert "Hello, Ada!" in await reply.inner_text()
        assert await page.locator("#timeline li[data-kind='message']").count() == 1


async def test_context_lists_its_tasks_and_a_new_context_starts_empty(page: Any) -> None:
    async with serve_app(demo_app) as base:
        await open_explorer(page, base, "demo.add")
        await page.click("button.example")
        ids = []
        for _ in range(2):
            await page.click("#send")
            await page.wait_for_selector(STATE.format("TASK_STATE_COMPLETED"))
            ids.append(await page.get_attribute("#task-body .task", "data-task-id"))
            await page.wait_for_selector(f"#context-tasks [data-task-id='{ids[-1]}']")
        assert ids[0] != ids[1]
        assert await page.locator("#context-tasks li[data-task-id]").count() == 2
        # Picking an earlier task in the list loads it (GetTask).
        await page.click(f"#context-tasks [data-task-id='{ids[0]}'] button")
        await page.wait_for_selector(f"#task-body .task[data-task-id='{ids[0]}']")
        await page.click("#context-new")
        assert "no context yet" in await page.inner_text("#context-id")
        await page.click("#send")
        await page.wait_for_selector(STATE.format("TASK_STATE_COMPLETED"))
        third = await page.get_attribute("#task-body .task", "data-task-id")
        await page.wait_for_selector(f"#context-tasks [data-task-id='{third}']")
        assert await page.locator("#context-tasks li[data-task-id]").count() == 1


async def test_skill_filter(page: Any) -> None:
    async with serve_app(demo_app) as base:
        await open_explorer(page, base)
        await page.fill("#skill-filter", "approve")
        items = page.locator("#skills li[data-skill-id]")
        assert await items.count() == 1
        assert await items.first.get_attribute("data-skill-id") == "demo.wipe"
        await page.fill("#skill-filter", "no-such-skill")
        assert "No skill matches" in await page.inner_text("#skills")


async def test_missing_card_is_reported_not_blank(page: Any) -> None:
    app = Starlette(routes=explorer_routes())
    async with running_server(app) as base:
        await page.goto(base + "/explorer/")
        box = page.locator("#card-body .error-box")
        await box.wait_for()
        text = await box.inner_text()
        assert "Agent card unavailable" in text
        assert "HTTP 404" in text
        assert page.log.errors == []


async def test_file_results_download_and_preview(page: Any) -> None:
    async with serve_app(demo_app) as base:
        await open_explorer(page, base, "demo.badge")
        await page.fill("[data-path='caption']", "shiny")
        await page.click("#send")
        await page.wait_for_selector(STATE.format("TASK_STATE_COMPLETED"))
        link = page.locator("#task-body a.file-link")
        assert (await link.inner_text()).endswith("badge.png")
        preview = page.locator("#task-body img.preview")
        await preview.wait_for()
        assert await preview.evaluate("img => img.complete && img.naturalWidth") == 1
        async with page.expect_download() as info:
            await link.click()
        download = await info.value
        assert download.suggested_filename == "badge.png"
        assert Path(await download.path()).read_bytes() == tiny_png()
        assert "shiny" in await page.inner_text("#task-body .artifact")
        assert page.log.console_errors() == []
