"""``workers=N`` scaling: SendMessage throughput with 1, 2, ... worker processes.

``python -m benchmarks.workers [--store sqlite|postgresql] [--max-workers N] [--seconds S]``

Each run serves the examples (``apcore-a2a serve``) in cluster mode on a fresh store and
drives it with wrk (blocking ``SendMessage``, text routed to ``text.stats``, 16
connections). Reported per N: requests/s, the speed-up over N=1 and the scaling
efficiency (speed-up / N). wrk itself needs CPU too, so on a machine with C cores the
fair range is N < C; the report says how many cores there are.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from benchmarks._proc import CARD_PATH, ROOT, _wait_ready, free_port
from benchmarks._wrk import run_wrk

EXAMPLES = str(ROOT / "examples" / "extensions")


@contextlib.contextmanager
def _store(kind: str) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{folder}/tasks.db"
        return
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    psql = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-q", "-c"]
    quiet = {**os.environ, "PGOPTIONS": "--client-min-messages=warning"}
    subprocess.run([*psql, f"CREATE SCHEMA {schema}"], check=True, env=quiet)
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/test?schema={schema}"
    finally:
        subprocess.run([*psql, f"DROP SCHEMA {schema} CASCADE"], check=True, env=quiet)


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.workers")
    parser.add_argument("--store", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--max-workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    print(f"workers scaling, store={args.store}, {cores} cores, c={args.connections}")
    baseline = 0.0
    for workers in range(1, args.max_workers + 1):
        with _store(args.store) as store, _agent(workers, store) as base:
            run_wrk(base + "/", "send", connections=args.connections, duration=2)  # warm-up
            result = run_wrk(
                base + "/", "send", connections=args.connections, duration=args.seconds, threads=2
            )
        rps = result.rps
        baseline = baseline or rps
        speedup = rps / baseline if baseline else 0.0
        print(
            f"N={workers}: {rps:8.1f} req/s  speed-up {speedup:4.2f}  "
            f"efficiency {speedup / workers:4.2f}  p50 {result.p50_ms:.1f} ms  "
            f"failed {result.failed}"
        )


if __name__ == "__main__":
    main()
