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
import math
import os
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks._proc import ROOT, cpu_seconds, free_port, serving
from benchmarks._wrk import run_wrk
from benchmarks.stores import fresh_store

EXAMPLES = str(ROOT / "examples" / "extensions")


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of *root* and every live process below it (the worker processes)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue  # ended meanwhile
        parent = int(raw[raw.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        with contextlib.suppress(OSError, ValueError):
            total += cpu_seconds(pid)
        todo.extend(children.get(pid, ()))
    return total


@dataclass
class Sample:
    """One wrk run against N workers."""

    rps: float
    #: CPU seconds of the server's processes per second of the run
    cores: float
    requests: int

    @property
    def cpu_us(self) -> float:
        return self.cores / self.rps * 1e6 if self.rps else float("nan")


@contextlib.contextmanager
def _agent(workers: int, store: str) -> Iterator[tuple[str, int]]:
    port = free_port()
    cmd = [
        sys.executable, "-m", "apcore_a2a", "serve", "--extensions-dir", EXAMPLES,
        "--port", str(port), "--workers", str(workers), "--cluster", "--task-store", store,
        "--log-level", "warning",
    ]  # fmt: skip
    with serving(cmd, port) as proc:
        yield f"http://127.0.0.1:{port}", proc.pid


def measure(
    store: str, max_workers: int, seconds: float, connections: int, rounds: int
) -> dict[int, list[Sample]]:
    """Samples per worker count, rounds interleaved (1, 2, ..., 1, 2, ...)."""
    samples: dict[int, list[Sample]] = {n: [] for n in range(1, max_workers + 1)}
    for rnd in range(1, rounds + 1):
        for workers in samples:
            with fresh_store(store) as url, _agent(workers, url) as (base, pid):
                run_wrk(base + "/", "send", connections=connections, duration=2)  # warm-up
                before = tree_cpu_seconds(pid)
                result = run_wrk(
                    base + "/", "send", connections=connections, duration=seconds, threads=2
                )
                used = tree_cpu_seconds(pid) - before
            if result.failed:
                raise RuntimeError(f"workers={workers}: {result.failed} failed requests")
            sample = Sample(result.rps, used / result.duration_s, result.requests)
            samples[workers].append(sample)
            print(
                f"workers round {rnd} N={workers}: {sample.rps:8.1f} req/s, "
                f"{sample.cores:.2f} server cores, {sample.cpu_us:.0f} CPU us/req",
                file=sys.stderr,
            )
    return samples


def render(store: str, connections: int, seconds: float, samples: dict[int, list[Sample]]) -> str:
    """The Markdown section: medians (min-max), speed-up and efficiencies against N=1."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rounds = len(next(iter(samples.values()), []))
    lines = [
        f"## Workers scaling (`python -m benchmarks.workers`) — {now}",
        "",
        f"`apcore-a2a serve --workers N --cluster` on {store} (examples, `text.stats`), blocking"
        f" SendMessage at c={connections} with wrk, {rounds} interleaved rounds of {seconds:g} s;"
        f" {os.cpu_count()} cores shared with wrk and the database, loadavg at end {load}."
        " Server cores: CPU seconds of the server's processes per second of the run;"
        " efficiency per core used: requests per server core against N=1.",
        "",
        "| workers | req/s | speed-up vs N=1 | efficiency | server cores | server CPU µs/req "
        "| efficiency per core used |",
        "|---|---|---|---|---|---|---|",
    ]
    one = samples.get(1, [])
    base = statistics.median(s.rps for s in one) if one else float("nan")
    base_per_core = statistics.median(s.rps / s.cores for s in one) if one else float("nan")
    for workers, values in samples.items():
        rps = [s.rps for s in values]
        med = statistics.median(rps)
        spread = f" ({min(rps):.0f}-{max(rps):.0f})" if len(rps) > 1 else ""
        speedup = med / base if base else float("nan")  # N=1 answered none in time
        cores = statistics.median(s.cores for s in values)
        cpu_us = statistics.median(s.cpu_us for s in values)
        per_core = statistics.median(s.rps / s.cores for s in values) / (base_per_core or math.nan)
        lines.append(
            f"| {workers} | {med:.0f}{spread} | {speedup:.2f}x | {speedup / workers:.2f} "
            f"| {cores:.2f} | {cpu_us:.0f} | {per_core:.2f} |"
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
    samples = measure(args.store, args.max_workers, args.seconds, args.connections, args.rounds)
    text = render(args.store, args.connections, args.seconds, samples)
    print(text)
    if args.append:
        with args.append.open("a") as fh:
            fh.write("\n" + text)


if __name__ == "__main__":
    main()
