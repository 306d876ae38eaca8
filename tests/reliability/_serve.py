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
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .._support import ROOT, free_port, stop_process


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--settings", default="{}")
    args = parser.parse_args()

    import uvicorn

    from apcore_a2a import A2AServerFactory

    from ._modules import build_executor

    overrides: dict[str, Any] = json.loads(args.settings)
    app, _card = A2AServerFactory(
        build_executor(), environ={}, port=args.port, name="reliability", **overrides
    ).create()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


@dataclass
class Served:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

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


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"agent exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/.well-known/agent-card.json", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"agent at {url} not ready in {timeout}s")


@contextlib.contextmanager
def agent_process(port: int | None = None, **settings: Any) -> Iterator[Served]:
    """Start the agent as a subprocess on 127.0.0.1; SIGTERM (then SIGKILL) on exit."""
    port = port or free_port()
    fd, name = tempfile.mkstemp(prefix="reliability-agent-", suffix=".log")
    log = Path(name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("A2A_", "JWT_"))}
    with os.fdopen(fd, "wb") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.reliability._serve",
                "--port",
                str(port),
                "--settings",
                json.dumps(settings),
            ],
            cwd=str(ROOT),
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc, log)
        yield Served(url, proc, log)
    finally:
        stop_process(proc, timeout=20)
        log.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
