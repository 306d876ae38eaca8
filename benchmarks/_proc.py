"""Server subprocesses and their CPU/RSS counters read from ``/proc/<pid>``."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CARD_PATH = "/.well-known/agent-card.json"
_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of *pid* (all its threads) in seconds."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    # The command name may contain spaces; fields after the closing paren are fixed.
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


@dataclass(frozen=True)
class Variant:
    """One system under test plus its uvicorn loop/http choice."""

    label: str
    kind: str  # "plain" (S) or "ours" (O)
    loop: str = "asyncio"
    http: str = "h11"


@dataclass
class Server:
    variant: Variant
    base_url: str
    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def rss(self) -> int:
        return rss_bytes(self.pid)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    # One client for all the polls: httpx.get builds one (TLS context included) per call,
    # 20 ms of CPU each, taken from the server starting beside it.
    with httpx.Client(timeout=1.0) as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                out = log.read_text(errors="replace")
                raise RuntimeError(f"server exited with {proc.returncode}:\n{out}")
            try:
                if http.get(url).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within {timeout}s")


@contextlib.contextmanager
def serving(cmd: list[str], port: int, timeout: float = 60.0) -> Iterator[subprocess.Popen[bytes]]:
    """Run the server *cmd* (listening on *port*) until its card answers; SIGTERM it on exit."""
    # A file, not a pipe: a chatty server must never block on a full pipe mid-measurement.
    fd, log_name = tempfile.mkstemp(prefix="bench-server-", suffix=".log")
    log = Path(log_name)
    with os.fdopen(fd, "wb") as log_file:
        proc = subprocess.Popen(cmd, cwd=str(ROOT), stdout=log_file, stderr=subprocess.STDOUT)
    try:
        _wait_ready(f"http://127.0.0.1:{port}{CARD_PATH}", proc, log, timeout)
        yield proc
    finally:
        stop(proc)
        log.unlink(missing_ok=True)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM *proc* if it runs, and reap it (SIGKILL after 60 s)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def run_server(
    variant: Variant,
    *,
    timeout: float = 60.0,
    task_store: str = "memory://",
    cluster: bool = False,
) -> Iterator[Server]:
    """Start ``python -m benchmarks.serve`` for *variant* on *task_store* (in cluster mode
    with *cluster*); stop it on exit."""
    port = free_port()
    cmd = [
        sys.executable, "-m", "benchmarks.serve", variant.kind, "--port", str(port),
        "--loop", variant.loop, "--http", variant.http, "--task-store", task_store,
        *(["--cluster"] if cluster else []),
    ]  # fmt: skip
    with serving(cmd, port, timeout) as proc:
        yield Server(variant, f"http://127.0.0.1:{port}", proc)
