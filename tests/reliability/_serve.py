"""Run the reliability agent in its own process: ``python -m tests.reliability._serve``.

A separate process gives the server its own core and GIL (the hostile-input suite sends
thousands of requests), can be killed with SIGKILL, and has an RSS of its own to sample.
Settings arrive as one JSON object of :class:`~apcore_a2a.settings.Settings` fields.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .._support import ROOT, ServerProcess, free_port, stop_process

#: Seconds the agent gets to exit after SIGTERM: the default ``shutdown_timeout`` (30 s)
#: plus room for a busy machine.
STOP_TIMEOUT = 45.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--settings", default="{}")
    args = parser.parse_args()

    from apcore_a2a import A2AServerFactory
    from apcore_a2a._runner import run_app

    from ._modules import build_executor

    overrides: dict[str, Any] = json.loads(args.settings)
    overrides.setdefault("log_level", "warning")
    factory = A2AServerFactory(
        build_executor(),
        environ={},
        host="127.0.0.1",
        port=args.port,
        name="reliability",
        **overrides,
    )
    app, _card = factory.create()
    # serve()'s own runner: a graceful SIGTERM drains the tasks and exits 0, like the product
    run_app(app, factory.settings)


@dataclass
class Served:
    url: str
    proc: ServerProcess

    def log_text(self) -> str:
        return self.proc.output()

    def rss_kib(self) -> int:
        return proc_rss_kib(self.proc.pid)

    def fd_count(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


def proc_rss_kib(pid: int) -> int:
    """Resident set size of *pid* in KiB, read from ``/proc``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def wait_ready(url: str, proc: ServerProcess, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=1) as http:  # one client: one per poll costs 20 ms of CPU
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"agent exited with {proc.returncode}: {proc.output()[-2000:]}")
            try:
                if http.get(url + "/.well-known/agent-card.json").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    raise RuntimeError(f"agent at {url} not ready in {timeout}s")


@contextlib.contextmanager
def agent_process(port: int | None = None, **settings: Any) -> Iterator[Served]:
    """Start the agent as a subprocess on 127.0.0.1.

    On exit it gets SIGTERM and must exit 0 within :data:`STOP_TIMEOUT` seconds, else the
    test fails (unless the test crashed it on purpose with ``served.proc.kill9()``).
    """
    port = port or free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("A2A_", "JWT_"))}
    proc = ServerProcess(
        [
            sys.executable,
            "-m",
            "tests.reliability._serve",
            "--port",
            str(port),
            "--settings",
            json.dumps(settings),
        ],
        cwd=ROOT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc)
        yield Served(url, proc)
    finally:
        stop_process(proc, timeout=STOP_TIMEOUT)


if __name__ == "__main__":
    main()
