"""What fair dispatch of the sync threads costs (``execution/fair_pool.py``), in-process.

``python -m benchmarks.fair_pool [--calls 20000] [--rounds 3]`` prints one JSON line: CPU
µs (of the whole process, every thread) per ``loop.run_in_executor`` call of a function
that returns at once, on a plain ``ThreadPoolExecutor`` (what the agent used before) and
on a ``FairPool`` lane, of 32 threads, and their ratio (the median round's; CPU time, as a
busy machine stretches wall time but hardly the work done). ``one_at_a_time``: each call awaited
before the next (a thread is always free: the dispatch itself). ``burst``: *calls* at once
from 8 callers (every thread busy, most calls waiting: the queue and the turns).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor

from apcore_a2a.execution.fair_pool import FairPool

WORKERS = 32
CALLERS = 8


def _nothing() -> None:
    return None


async def _one_at_a_time(lanes: Sequence[Executor], calls: int) -> float:
    loop = asyncio.get_running_loop()
    start = time.process_time()
    for i in range(calls):
        await loop.run_in_executor(lanes[i % len(lanes)], _nothing)
    return (time.process_time() - start) / calls * 1e6


async def _burst(lanes: Sequence[Executor], calls: int) -> float:
    loop = asyncio.get_running_loop()
    start = time.process_time()
    await asyncio.gather(
        *(loop.run_in_executor(lanes[i % len(lanes)], _nothing) for i in range(calls))
    )
    return (time.process_time() - start) / calls * 1e6


async def measure(calls: int, rounds: int) -> dict[str, float]:
    result: dict[str, float] = {"calls": calls, "rounds": rounds}
    for name, way in (("one_at_a_time", _one_at_a_time), ("burst", _burst)):
        plain_us, fair_us = [], []
        for _ in range(rounds):
            plain = ThreadPoolExecutor(WORKERS)
            fair = FairPool(WORKERS)
            lanes = [fair.lane(f"caller-{c}") for c in range(CALLERS)]
            await way([plain], calls // 10)  # threads started, code warm
            await way(lanes, calls // 10)
            plain_us.append(await way([plain], calls))
            fair_us.append(await way(lanes, calls))
            plain.shutdown()
            fair.shutdown()
        plain_median, fair_median = statistics.median(plain_us), statistics.median(fair_us)
        result[f"{name}_plain_cpu_us"] = round(plain_median, 2)
        result[f"{name}_fair_cpu_us"] = round(fair_median, 2)
        result[f"{name}_ratio"] = round(fair_median / plain_median, 2)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fair_pool")
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(measure(args.calls, args.rounds))))


if __name__ == "__main__":
    main()
