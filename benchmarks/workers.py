"""``workers=N`` scaling: SendMessage throughput with 1, 2, ... worker processes.

``python -m benchmarks.workers [--store sqlite|postgresql] [--max-workers N] [--seconds S]
[--rounds R] [--append FILE]``

Each run serves the examples (``apcore-a2a serve``) in cluster mode on a fresh store and
drives it with wrk (blocking ``SendMessage``, text routed to ``text.stats``, 16
connections), worker counts interleaved round by round. Reported per N: the median
requests/s with (min-max), the speed-up over N=1 and the scaling efficiency (speed-up / N).
wrk itself needs CPU too, so on a machine with C cores the fair range is N < C; the report
says how many cores there are. ``nox -s bench`` appends the table to RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from benchmarks._proc import CARD_PATH, ROOT, _wait_ready, free_port
from benchmarks._wrk import run_wrk
from benchmarks.stores import fresh_store

EXAMPLES = str(ROOT / "examples" / "extensions")


@contextlib.contextmanager
def _agent(workers: int, store: str) -> Iterator[str]:
    port = free_port()
    cmd = [
        sys.executable, "-m", "apcore_a2a", "serve", "--extensions-dir", EXAMPLES,
        "--port", str(port), "--workers", str(workers), "--cluster", "--task-store", store,
        "--log-level", "warning",
    ]  # fmt: skip
    fd, log_name = tempfile.mkstemp(prefix="bench-workers-", suffix=".log")
    log = Path(log_name)
    with os.fdopen(fd, "wb") as sink:
        proc = subprocess.Popen(cmd, cwd=str(ROOT), stdout=sink, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base + CARD_PATH, proc, log, 60)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.unlink(missing_ok=True)


def measure(
    store: str, max_workers: int, seconds: float, connections: int, rounds: int
) -> dict[int, list[float]]:
    """Requests/s per worker count, rounds interleaved (1, 2, ..., 1, 2, ...)."""
    rps: dict[int, list[float]] = {n: [] for n in range(1, max_workers + 1)}
    for rnd in range(1, rounds + 1):
        for workers in rps:
            with fresh_store(store) as url, _agent(workers, url) as base:
                run_wrk(base + "/", "send", connections=connections, duration=2)  # warm-up
                result = run_wrk(
                    base + "/", "send", connections=connections, duration=seconds, threads=2
                )
            if result.failed:
                raise RuntimeError(f"workers={workers}: {result.failed} failed requests")
            rps[workers].append(result.rps)
            print(f"workers round {rnd} N={workers}: {result.rps:8.1f} req/s", file=sys.stderr)
    return rps


def render(store: str, connections: int, seconds: float, rps: dict[int, list[float]]) -> str:
    """The Markdown section: medians (min-max), speed-up and efficiency against N=1."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rounds = len(next(iter(rps.values()), []))
    lines = [
        f"## Workers scaling (`python -m benchmarks.workers`) — {now}",
        "",
        f"`apcore-a2a serve --workers N --cluster` on {store} (examples, `text.stats`), blocking"
        f" SendMessage at c={connections} with wrk, {rounds} interleaved rounds of {seconds:g} s;"
        f" {os.cpu_count()} cores shared with wrk, loadavg at end {load}.",
        "",
        "| workers | req/s | speed-up vs N=1 | efficiency |",
        "|---|---|---|---|",
    ]
    base = statistics.median(rps[1]) if rps.get(1) else float("nan")
    for workers, values in rps.items():
        med = statistics.median(values)
        spread = f" ({min(values):.0f}-{max(values):.0f})" if len(values) > 1 else ""
        speedup = med / base
        lines.append(
            f"| {workers} | {med:.0f}{spread} | {speedup:.2f}x | {speedup / workers:.2f} |"
        )
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.workers")
    parser.add_argument("--store", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--max-workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--append", type=Path, help="also append the table to this Markdown file")
    args = parser.parse_args(argv)
    rps = measure(args.store, args.max_workers, args.seconds, args.connections, args.rounds)
    text = render(args.store, args.connections, args.seconds, rps)
    print(text)
    if args.append:
        with args.append.open("a") as fh:
            fh.write("\n" + text)


if __name__ == "__main__":
    main()
