"""Shared helpers for tests: real uvicorn servers on 127.0.0.1 and free ports."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import uvicorn

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def running_server(app: Any, *, port: int | None = None, **config: Any) -> AsyncIterator[str]:
    """Run *app* under a real uvicorn server on 127.0.0.1 inside the current event loop.

    Yields the base URL (``http://127.0.0.1:PORT``). The server is shut down gracefully on
    exit, which also runs the app's lifespan shutdown.
    """
    port = port or free_port()
    cfg = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **config
    )
    server = uvicorn.Server(cfg)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve())
    deadline = time.monotonic() + 20
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("uvicorn exited before it started")
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start in time")
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=30)


def wait_http(
    url: str, *, timeout: float = 30.0, proc: subprocess.Popen[Any] | None = None
) -> None:
    """Poll *url* until it answers (any status) or raise after *timeout* seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise RuntimeError(f"process exited with {proc.returncode}: {out!r}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within {timeout}s")


def stop_process(proc: subprocess.Popen[Any], *, timeout: float) -> None:
    """SIGTERM *proc* if it still runs and reap it; SIGKILL if it outlives *timeout* seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def cli_server(
    args: Sequence[str],
    *,
    port: int | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    ready_path: str = "/.well-known/agent-card.json",
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Start ``apcore-a2a serve ...`` (via ``python -m apcore_a2a``) as a subprocess."""
    port = port or free_port()
    full_env = {**os.environ, **(env or {})}
    cmd = [
        sys.executable,
        "-m",
        "apcore_a2a",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *args,
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=str(cwd or ROOT),
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + ready_path, proc=proc)
        yield base, proc
    finally:
        stop_process(proc, timeout=20)
        if proc.stdout:
            proc.stdout.close()


@contextlib.contextmanager
def threaded_server(app: Any, *, port: int | None = None, **config: Any) -> Iterator[str]:
    """Run *app* under real uvicorn on 127.0.0.1 in a background thread (own event loop).

    Usable from sync fixtures of any scope; tests talk to it over the network.
    """
    import threading

    port = port or free_port()
    cfg = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **config
    )
    server = uvicorn.Server(cfg)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn exited before it started")
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start in time")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
