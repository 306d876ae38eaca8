"""The agent under test: our server for the lifecycle modules, in the test's own loop.

Running uvicorn inside the test's event loop lets every test check, after shutdown, that
the server left no asyncio task behind (see :func:`assert_no_leaks`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from starlette.applications import Starlette

from apcore_a2a import A2AServerFactory

from .._support import free_port, running_server
from ._modules import Probe, build_executor

DESTROYED = "Task was destroyed but it is pending"


@dataclass
class Agent:
    url: str
    app: Starlette
    probe: Probe

    @property
    def state(self) -> Any:
        return self.app.state.a2a


@contextlib.asynccontextmanager
async def agent_server(caplog: pytest.LogCaptureFixture, **settings: Any) -> AsyncIterator[Agent]:
    """Serve the lifecycle modules on 127.0.0.1; check for leaked tasks after shutdown."""
    probe = Probe(gate=asyncio.Event())
    port = free_port()
    # Served as serve() serves it: with the process tuning (the sized thread pool).
    settings.setdefault("process_tuning", True)
    app, _card = A2AServerFactory(
        build_executor(probe), environ={}, port=port, name="lifecycle", **settings
    ).create()
    async with running_server(app, port=port) as url:
        yield Agent(url, app, probe)
    await assert_no_leaks(caplog)


async def assert_no_leaks(caplog: pytest.LogCaptureFixture) -> None:
    """No asyncio task outlives the server, and none was destroyed while pending.

    One exception: sse-starlette keeps a single shutdown watcher per event loop by
    design (it polls for uvicorn's exit flag, which it finds through the SIGTERM handler
    that this in-loop test server does not install; ``asyncio.run`` cancels it in
    production). It is a library singleton, not per request: at most one may exist, and
    it is stopped here so the loop closes cleanly.
    """
    current = asyncio.current_task()
    pending = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    watchers = [t for t in pending if _coro_name(t) == "_shutdown_watcher"]
    assert len(watchers) <= 1, watchers
    for watcher in watchers:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    pending = [t for t in pending if t not in watchers]
    assert not pending, f"tasks left after shutdown: {pending}"
    gc.collect()
    destroyed = [r for r in caplog.records if DESTROYED in r.getMessage()]
    assert not destroyed, [r.getMessage() for r in destroyed]


def _coro_name(task: asyncio.Task[Any]) -> str:
    return getattr(task.get_coro(), "__qualname__", "")


def asyncio_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.ERROR
    ]
