"""Run the ops agent with ``serve()`` in a child process (real signals, real exit code)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from .._support import ROOT, ServerProcess, free_port, stop_process, wait_http

#: Seconds beyond its ``shutdown_timeout`` a child may take to exit after SIGTERM.
STOP_MARGIN = 15.0

_SCRIPT = """
import json, sys
sys.path.insert(0, {root!r})
from tests.ops._agent import build_registry
from apcore_a2a import serve
serve(build_registry(gated=True), **json.loads(sys.argv[1]))
"""


@contextlib.contextmanager
def serve_process(
    env: dict[str, str] | None = None, **settings: Any
) -> Iterator[tuple[str, ServerProcess]]:
    """``serve(build_registry(gated=True), port=..., **settings)`` in a child (with *env*
    added to its environment); yields (url, process).

    On exit the child gets SIGTERM (if still running) and must exit 0 within its
    ``shutdown_timeout`` (+ :data:`STOP_MARGIN`), else the test fails.
    """
    port = free_port()
    args = json.dumps({"host": "127.0.0.1", "port": port, **settings})
    script = [sys.executable, "-c", _SCRIPT.format(root=str(ROOT)), args]
    proc = ServerProcess(script, cwd=ROOT, env={**os.environ, **env} if env else None, scripts=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health", proc=proc)
        yield url, proc
    finally:
        stop_process(proc, timeout=float(settings.get("shutdown_timeout", 30.0)) + STOP_MARGIN)


async def collect_events(
    stream: Any, events: list[Any], first: asyncio.Event | None = None
) -> None:
    """Append what *stream* yields to *events*, and how it ended if not normally (the
    exception); set *first* at its first event, and at its end."""
    try:
        async for event in stream:
            events.append(event)
            if first is not None:
                first.set()
    except Exception as exc:  # how the stream ended, if not normally
        events.append(exc)
    if first is not None:
        first.set()
