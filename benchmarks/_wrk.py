"""Drive Debian's ``wrk`` with ``lua/a2a.lua`` and read its machine-readable summary."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "lua" / "a2a.lua"


class WrkMissingError(RuntimeError):
    """``wrk`` is not on PATH."""


@dataclass(frozen=True)
class WrkResult:
    requests: int
    duration_s: float
    bad: int  # non-200 or a body without the expected content
    socket_errors: int
    p50_ms: float
    p99_ms: float

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s else 0.0

    @property
    def failed(self) -> int:
        return self.bad + self.socket_errors

    def metrics(self, server_cpu_s: float) -> dict[str, float]:
        """The report row of this run, with the server's CPU seconds spent during it."""
        return {
            "rps": self.rps,
            "cpu_us": server_cpu_s / self.requests * 1e6 if self.requests else float("nan"),
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "errors": float(self.failed),
        }


def wrk_path() -> str:
    path = shutil.which("wrk")
    if path is None:
        raise WrkMissingError("wrk not found: install it with `apt-get install -y wrk`")
    return path


def _parse(output: str) -> WrkResult:
    for line in output.splitlines():
        if line.startswith("WRKJSON "):
            raw = json.loads(line[len("WRKJSON ") :])
            return WrkResult(
                requests=int(raw["requests"]),
                duration_s=raw["duration_us"] / 1e6,
                bad=int(raw["bad"]),
                socket_errors=int(raw["socket_errors"]),
                p50_ms=raw["p50_us"] / 1e3,
                p99_ms=raw["p99_us"] / 1e3,
            )
    raise RuntimeError(f"wrk printed no summary:\n{output}")


def _cmd(url: str, mode: str, connections: int, duration: float, threads: int) -> list[str]:
    threads = max(1, min(threads, connections))
    # A generous --timeout: on a busy machine a slow reply is latency, not an error.
    return [
        wrk_path(), f"-t{threads}", f"-c{connections}", f"-d{max(1, round(duration))}s",
        "--timeout", "30s", "--latency", "-s", str(SCRIPT), url, "--", mode,
    ]  # fmt: skip


def run_wrk(
    url: str, mode: str, *, connections: int, duration: float, threads: int = 1
) -> WrkResult:
    """Run wrk for *duration* seconds; *mode* is ``card`` or ``send`` (see the Lua script)."""
    cmd = _cmd(url, mode, connections, duration, threads)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr or done.stdout}")
    return _parse(done.stdout)


def run_wrk_count(
    url: str, *, total: int, connections: int, threads: int = 1, max_seconds: float = 3600
) -> WrkResult:
    """Send about *total* blocking SendMessage requests, then stop wrk.

    Each wrk thread stops after ``total / threads`` replies and prints a marker; wrk itself only
    ends after ``-d``, so once every thread has printed it we interrupt wrk, which then reports.
    """
    threads = max(1, min(threads, connections))
    per_thread = max(1, total // threads)
    cmd = [*_cmd(url, "send", connections, max_seconds, threads), str(per_thread)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    all_stopped = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        markers = 0
        for line in proc.stdout:
            lines.append(line)
            if line.strip() == "WRKLIMIT":
                markers += 1
                if markers == threads:
                    all_stopped.set()
        all_stopped.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    all_stopped.wait(timeout=max_seconds + 30)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    thread.join(timeout=10)
    return _parse("".join(lines))
