"""Fixtures for the Explorer tests: Debian's Chromium driven by Playwright for Python."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests._support import free_port, not_installed, running_server

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@dataclass
class PageLog:
    """What the page did: console messages, uncaught errors and every request URL."""

    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def console_errors(self) -> list[str]:
        return [text for kind, text in self.console if kind == "error"]


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if not CHROMIUM.exists():
        not_installed("Debian's chromium (apt-get install chromium)")
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        instance = await pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield instance
        finally:
            await instance.close()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    context = await browser.new_context(viewport={"width": 1440, "height": 1000})
    pg = await context.new_page()
    pg.set_default_timeout(10_000)
    log = PageLog()
    pg.on("console", lambda msg: log.console.append((msg.type, msg.text)))
    pg.on("pageerror", lambda exc: log.errors.append(str(exc)))
    pg.on("request", lambda req: log.requests.append(req.url))
    pg.log = log
    try:
        yield pg
    finally:
        await context.close()


@contextlib.asynccontextmanager
async def serve_app(make_app: Any, **settings: Any) -> AsyncIterator[str]:
    """Build the app for a known free port (so the card URL is right) and run it."""
    port = free_port()
    app = make_app(port=port, **settings)
    async with running_server(app, port=port) as base:
        yield base
